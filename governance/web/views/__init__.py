"""Server-rendered UI views. They read through selectors and write through services only."""
