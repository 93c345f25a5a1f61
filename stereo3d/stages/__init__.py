"""One module per workflow rule, named after it: the function each thin script calls."""
