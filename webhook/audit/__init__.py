"""The decision log: records, the hash chain, the durable writer, and the tools that read it back."""
