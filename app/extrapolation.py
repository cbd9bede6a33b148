"""Extrapolation lab (placeholder until the page lands)."""

import streamlit as st

st.title("Extrapolation lab")
st.info("Coming soon.")
