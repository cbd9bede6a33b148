"""Compare positional methods (placeholder until the comparison page lands)."""

import streamlit as st

st.title("Compare positional methods")
st.info("Coming soon.")
