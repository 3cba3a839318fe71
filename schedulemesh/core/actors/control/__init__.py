"""`schedulemesh.core.actors.control`: the original's control-plane module paths."""
