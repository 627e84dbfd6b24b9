"""`make demo`: the whole experiment in miniature on CPU, with the real services as local processes."""
