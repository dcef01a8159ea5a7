"""Drop-in replacements for the functions users call today. Nothing here is imported eagerly."""
