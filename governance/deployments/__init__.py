"""Deployment requests: facts, serving plan, review state machine, evidence, obligations, waivers, usage."""
