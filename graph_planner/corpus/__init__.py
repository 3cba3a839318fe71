"""Task corpus: procedural bugs in real packages (mutate); the builder and loader are not built yet."""
