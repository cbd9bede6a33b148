"""The Streamlit pages of alibi-viz (`streamlit run app/main.py`); the library is `alibi_viz`."""
