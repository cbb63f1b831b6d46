"""Answer parity: does a candidate deployment answer a suite of prompts like the reference?

`suite` (the JSONL format), `suite_files` (reading suites), `wire` (requests and answers),
`compare` (vLLM's top-k rule), `verdict` (the result), `runner` (HTTP, retries, the run).
docs/parity.md says what parity means and how to write a suite.
"""
