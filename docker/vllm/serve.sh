#!/usr/bin/env bash
# Serve Qwen3-VL-8B (INT4 weights, FP8 KV cache) with vLLM's OpenAI-compatible server.
#
#   docker/vllm/serve.sh                  # on the host: starts the pinned vLLM container
#   serve.sh --in-container               # inside the container (compose.yaml uses this)
#   serve.sh --print-args MODEL_PATH      # the vLLM arguments, NUL-separated (the tests
#                                         # serve a tiny model with them, and check them
#                                         # against the installed vLLM's own parser)
#
# INT4 weights, two ways (QUANT): "awq" (default; an AWQ W4A16 checkpoint whose
# config.json carries its quantization_config, run with the fused Marlin kernels) or
# "bitsandbytes" (what the paper used: the unquantised checkpoint quantised to 4 bit by
# BitsAndBytes while loading; slower kernels, and the full BF16 download).
# FP8 KV cache and both INT4 paths are verified only on a GPU (README.md).
#
# Every vLLM flag lives here, once; compose.yaml runs this same script. The weights are a
# host folder mounted read-only; nothing is downloaded (HF_HUB_OFFLINE=1). See README.md.
set -euo pipefail

IMAGE="${VLLM_IMAGE:-vllm/vllm-openai:v0.13.0}"
WEIGHTS_DIR="${WEIGHTS_DIR:-$HOME/models}"                 # host folder holding MODEL_SUBDIR
QUANT="${QUANT:-awq}"                                      # awq | bitsandbytes
case "$QUANT" in
  awq) default_subdir=Qwen3-VL-8B-Instruct-AWQ-4bit ;;
  bitsandbytes) default_subdir=Qwen3-VL-8B-Instruct ;;
  *) echo "serve.sh: QUANT must be awq or bitsandbytes, got '$QUANT'" >&2; exit 2 ;;
esac
MODEL_SUBDIR="${MODEL_SUBDIR:-$default_subdir}"
SERVED_NAME="${SERVED_NAME:-qwen3-vl-8b-instruct-awq}"     # = vlm.model in config/perception.yaml
KV_CACHE_DTYPE="${KV_CACHE_DTYPE:-fp8}"
PORT="${PORT:-8000}"
GPU_UTIL="${GPU_UTIL:-0.60}"          # leaves room on the card for the CLIP embedder
MAX_MODEL_LEN="${MAX_MODEL_LEN:-4096}"
MAX_NUM_SEQS="${MAX_NUM_SEQS:-4}"
MAX_PIXELS="${MAX_PIXELS:-409600}"    # 640x640 -> at most 400 visual tokens (32x32 px each)
MIN_PIXELS="${MIN_PIXELS:-65536}"     # Qwen3-VL's default lower bound (64 tokens)
GPU_DEVICE="${GPU_DEVICE:-0}"

vllm_args() {
  local model_path="$1"
  local args=(
    "$model_path"
    --served-model-name "$SERVED_NAME"
    --host 0.0.0.0 --port 8000
    --kv-cache-dtype "$KV_CACHE_DTYPE"
    --max-model-len "$MAX_MODEL_LEN"
    --max-num-seqs "$MAX_NUM_SEQS"
    --gpu-memory-utilization "$GPU_UTIL"
    # Images only, one per prompt: profiling then reserves encoder memory for one image
    # and none for video (vLLM Qwen3-VL recipe; JSON form required since vLLM 0.10).
    --limit-mm-per-prompt '{"image": 1, "video": 0}'
    # Cap the image size the profiler plans for. Qwen3-VL-8B's default longest_edge is
    # 16777216 px (16384 tokens), the cause of start-up OOMs (vllm#16570, vllm#18550).
    # Both spellings: max_pixels (read by older vLLM profiling) and size (honoured by the
    # Qwen3-VL image processor, vllm#34402, transformers#41955); same values.
    --mm-processor-kwargs "{\"max_pixels\": $MAX_PIXELS, \"min_pixels\": $MIN_PIXELS, \"size\": {\"longest_edge\": $MAX_PIXELS, \"shortest_edge\": $MIN_PIXELS}}"
    # Server defaults from vLLM, not the checkpoint's generation_config.json (which sets
    # sampling); the client sends temperature 0 for reproducible answers anyway.
    --generation-config vllm
    # Guided decoding (the client's response_format json_schema) with xgrammar, and no
    # optional whitespace between JSON tokens: with it, a weak model padded its answer
    # with whitespace until max_tokens (seen with a random-weight Qwen3-VL, test/vllm).
    # disable_any_whitespace needs an explicit xgrammar or guidance backend.
    --structured-outputs-config '{"backend": "xgrammar", "disable_any_whitespace": true}'
  )
  if [[ "$QUANT" == bitsandbytes ]]; then
    # In-flight 4-bit quantisation of the BF16 checkpoint (the paper's INT4 path).
    args+=(--quantization bitsandbytes)
  fi
  # awq: the checkpoint's quantization_config (compressed-tensors AWQ W4A16) is detected
  # from config.json; no --quantization flag needed.
  if [[ -n "${VLLM_API_KEY:-}" ]]; then
    args+=(--api-key "$VLLM_API_KEY")
  fi
  printf '%s\0' "${args[@]}"
}

if [[ "${1:-}" == "--print-args" ]]; then
  [[ -n "${2:-}" ]] || { echo "usage: serve.sh --print-args MODEL_PATH" >&2; exit 2; }
  vllm_args "$2"
  exit 0
fi

if [[ "${1:-}" == "--in-container" ]]; then
  model_path="/models/$MODEL_SUBDIR"
  if [[ ! -f "$model_path/config.json" ]]; then
    echo "serve.sh: no weights at $model_path (mount WEIGHTS_DIR at /models)" >&2
    exit 2
  fi
  mapfile -d '' args < <(vllm_args "$model_path")
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1
  exec vllm serve "${args[@]}"
fi

if [[ ! -f "$WEIGHTS_DIR/$MODEL_SUBDIR/config.json" ]]; then
  echo "serve.sh: no weights at $WEIGHTS_DIR/$MODEL_SUBDIR; download them first:" >&2
  if [[ "$QUANT" == bitsandbytes ]]; then
    echo "  hf download Qwen/Qwen3-VL-8B-Instruct --local-dir $WEIGHTS_DIR/$MODEL_SUBDIR" >&2
  else
    echo "  hf download cyankiwi/Qwen3-VL-8B-Instruct-AWQ-4bit --local-dir $WEIGHTS_DIR/$MODEL_SUBDIR" >&2
  fi
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec docker run --rm --name agentic-grasp-vllm \
  --gpus "device=$GPU_DEVICE" --ipc=host \
  -p "127.0.0.1:$PORT:8000" \
  -v "$WEIGHTS_DIR:/models:ro" \
  -v "$here/serve.sh:/opt/agentic_grasp/serve.sh:ro" \
  -e QUANT="$QUANT" -e KV_CACHE_DTYPE="$KV_CACHE_DTYPE" \
  -e MODEL_SUBDIR="$MODEL_SUBDIR" -e SERVED_NAME="$SERVED_NAME" -e GPU_UTIL="$GPU_UTIL" \
  -e MAX_MODEL_LEN="$MAX_MODEL_LEN" -e MAX_NUM_SEQS="$MAX_NUM_SEQS" \
  -e MAX_PIXELS="$MAX_PIXELS" -e MIN_PIXELS="$MIN_PIXELS" -e VLLM_API_KEY \
  --entrypoint /bin/bash \
  "$IMAGE" /opt/agentic_grasp/serve.sh --in-container
