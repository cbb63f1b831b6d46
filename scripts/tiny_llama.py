"""Writes a tiny Llama-architecture model folder for a real engine run with
`--load-format dummy`: config.json (2 layers, hidden 256, 4 heads of 64), a byte-level BPE
tokenizer trained here on a few sentences, its tokenizer_config.json with a chat template,
and generation_config.json. No weights and no hub: the engine fills the weights from its seed.

Run with an interpreter that has `tokenizers` (any vLLM environment does):
    python scripts/tiny_llama.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIALS = ["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
TEXT = [
    "denv rolls releases of language models across fleets of GPUs.",
    "A replica is ready when its health probe answers and its metrics are scraped.",
    "The router spreads requests over replicas; a rollout replaces them one at a time.",
    "Tiny models with dummy weights say nothing useful, but the engine runs for real.",
    "Hello, how are you today? Tell me about the weather and the time.",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(TEXT * 4, trainer=trainer)
    return tok


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tok = tokenizer()
    tok.save(str(out / "tokenizer.json"))
    ids = {name: tok.token_to_id(name) for name in ("<s>", "</s>", "<unk>")}
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": tok.get_vocab_size(),
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "bos_token_id": ids["<s>"],
        "eos_token_id": ids["</s>"],
        "torch_dtype": "bfloat16",
    }
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<unk>",
        "model_max_length": 2048,
        "chat_template": CHAT_TEMPLATE,
    }
    generation = {"bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"]}
    for name, body in (
        ("config.json", config),
        ("tokenizer_config.json", tokenizer_config),
        ("generation_config.json", generation),
    ):
        (out / name).write_text(json.dumps(body, indent=2) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/tiny_llama.py OUT_DIR")
    write(Path(sys.argv[1]))
