"""Policy documents, validation, legacy normalisation and evaluation. Pure."""
