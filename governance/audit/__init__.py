"""Hash-chained, append-only audit trail (no Django import here: verify.py runs standalone)."""
