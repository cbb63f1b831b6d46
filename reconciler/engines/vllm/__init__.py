"""vLLM's engine card: flag tables per version (flags.py), the `vllm serve` argv builder
(argv.py), and the card that names every part (card.py)."""
