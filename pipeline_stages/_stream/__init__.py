"""The stream kernel: the frame every stage reads and writes, envelopes, the compile context, JSON text, the stateless path."""
