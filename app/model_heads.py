"""Model heads (placeholder until the page lands)."""

import streamlit as st

st.title("Model heads")
st.info("Coming soon.")
