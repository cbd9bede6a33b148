"""Lesson (placeholder until the page lands)."""

import streamlit as st

st.title("Lesson")
st.info("Coming soon.")
