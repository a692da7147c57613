"""The trained tiny model: a small Llama trained by this repo on generated data of the eval families."""
