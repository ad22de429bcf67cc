"""NodeAffinity: required node selection and preferred-term scores."""
