"""`schedulemesh.core.actors`: the original's actor module paths (head, control.scheduler_actor)."""
