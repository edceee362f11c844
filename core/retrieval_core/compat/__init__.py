"""Drop-in functions with the signatures and return structures of other libraries."""
