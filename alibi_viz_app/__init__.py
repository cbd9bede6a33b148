"""The alibi-viz app: the Streamlit pages (`streamlit run alibi_viz_app/main.py`), the views
they share, and the class service behind a class on the Lesson (its store, its watcher, the
lesson's cursor). It draws with the library, `alibi_viz`, and never imports the experiments."""
