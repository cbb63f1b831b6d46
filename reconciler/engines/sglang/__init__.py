"""SGLang's engine card: flag tables per version (flags.py), the `sglang.launch_server` argv
builder (argv.py), and the card that names every part (card.py)."""
