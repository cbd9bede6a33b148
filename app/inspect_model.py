"""Inspect a model (placeholder until the page lands)."""

import streamlit as st

st.title("Inspect a model")
st.info("Coming soon.")
