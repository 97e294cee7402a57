"""What needs Ray: route hosts, the handle and its batcher, the runtime, metrics."""
