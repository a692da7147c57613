"""License catalog (versioned terms as data) and the policy engine that checks deployment facts against it."""
