"""Let PyPI's torchvision import beside the CPU torch in .venv-vllm (installed by setup.sh).

PyPI's torchvision 0.28.0 is a CUDA build: beside torch 2.13.0+cpu its C ops do not load,
and its Python side then fails registering a fake kernel for ``torchvision::nms``
("operator torchvision::nms does not exist"). vLLM and the Qwen2-VL image processor use
only torchvision's transforms, so declaring the op schemas lets it import; calling an op
still fails loudly. The same declarations as test/core/test_retrieval_embedding.py.

Loaded by a .pth file at interpreter start, in every process vLLM spawns. It only installs
an import hook: torch is imported when, and only when, torchvision is.
"""
import importlib.abc
import sys

_LIBRARIES = []


class _DeclareTorchvisionOps(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        try:
            import torch

            lib = torch.library.Library("torchvision", "FRAGMENT")
            for schema in ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                           "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"):
                try:
                    lib.define(schema)
                except RuntimeError:      # already defined (a working torchvision build)
                    pass
            _LIBRARIES.append(lib)
        except Exception:                 # noqa: BLE001 - never break interpreter start
            pass
        return None                       # the normal finders import torchvision


sys.meta_path.insert(0, _DeclareTorchvisionOps())
