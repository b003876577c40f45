"""Hypothesis strategies the file-reader fuzz tests share (corpus and eval data)."""

from hypothesis import strategies as st

# Lone surrogates (category Cs) come out of json.dumps as \udXXX escapes: valid JSON, unencodable text.
chars = st.characters(categories=["L", "N", "P", "Z", "Cs"])
texts = st.text(chars, max_size=20)
words = st.text(chars, min_size=1, max_size=20)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_subnormal=False)
    | texts,  # earlier tests set flush-to-zero (torch)
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
