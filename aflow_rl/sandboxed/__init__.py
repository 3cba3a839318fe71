"""Scripts that run inside the sandbox (copied into its working directory; stdlib only)."""
