"""Configuration of the VLM perception backend (``perception.vlm.*``):
server, model, timeouts and retries, image size and the answer's bounds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional, Tuple

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.config import reject_unknown
from agentic_grasp.core.perception.vlm import schema
from agentic_grasp.core.perception.config import DEFAULT_CONFUSION_MAP, DepthConfig
from agentic_grasp.core.perception.vlm.schema import vlm_words


#: Fragility of Table I objects by category word; the prior when the model's value is unusable.
DEFAULT_FRAGILITY_PRIORS: Dict[str, float] = {
    "cup": 0.3, "mug": 0.3, "apple": 0.1, "bottle": 0.1, "banana": 0.2, "bowl": 0.3,
    "cube": 0.0, "block": 0.0, "vase": 0.8, "wine glass": 0.9, "glass": 0.9,
    "screwdriver": 0.0, "smartphone": 0.5, "phone": 0.5, "ball": 0.0,
}


@dataclass
class VlmConfig:
    """Client settings (``vlm.*`` in config/perception.yaml); validated on construction."""

    url: str = field(default="http://127.0.0.1:8000/v1", metadata={
        "description": "Base URL of the OpenAI-compatible server (vLLM), ending in /v1"})
    model: str = field(default="qwen3-vl-8b-instruct-awq", metadata={
        "description": "Served model name; must equal --served-model-name of "
                       "docker/vllm/serve.sh"})
    api_key_env: str = field(default="VLLM_API_KEY", metadata={
        "description": "Environment variable holding the API key ('EMPTY' is sent when unset)"})
    timeout_s: float = field(default=30.0, metadata={
        "description": "Timeout of each HTTP request (s)"})
    max_attempts: int = field(default=3, metadata={
        "description": "Tries per request on timeouts, connection errors, HTTP 429 and 5xx"})
    backoff_base_s: float = field(default=0.5, metadata={
        "description": "Delay before retry k (k = 1, 2, ...) is backoff_base_s * 2^(k-1) (s)"})
    backoff_max_s: float = field(default=4.0, metadata={
        "description": "Cap on any retry delay, Retry-After included (s)"})
    backoff_jitter: float = field(default=0.0, metadata={
        "description": "Fraction of each retry delay drawn from a seeded RNG, in [0, 1)"})
    seed: int = field(default=0, metadata={
        "description": "Seed of the retry-jitter RNG"})
    max_tokens: int = field(default=1024, metadata={
        "description": "Maximum length of the model's answer (tokens)"})
    temperature: float = field(default=0.0, metadata={
        "description": "Sampling temperature (0 = greedy)"})
    image_max_side: int = field(default=640, metadata={
        "description": "Longer side of the image sent to the model (px)"})
    image_format: str = field(default="jpeg", metadata={
        "description": "Encoding of the image sent: jpeg (fast, small) or png"})
    jpeg_quality: int = field(default=90, metadata={
        "description": "JPEG quality of the image sent, 1..100"})
    coordinates: str = field(default="norm1000", metadata={
        "description": "Coordinates the model answers in: norm1000 (Qwen3-VL) or pixel"})
    use_env_proxy: bool = field(default=False, metadata={
        "description": "Honour http_proxy for the server (false: the server is local)"})
    default_fragility: float = field(default=0.5, metadata={
        "description": "Fragility used when the model's value is outside [0, 1] and no "
                       "category prior matches"})
    fragility_priors: Dict[str, float] = field(
        default_factory=lambda: dict(DEFAULT_FRAGILITY_PRIORS))
    depth: DepthConfig = field(default_factory=DepthConfig)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"vlm.url must be an http(s) URL, got {self.url!r}")
        self.url = self.url.rstrip("/")
        if not self.model:
            raise ConfigError("vlm.model must name the served model")
        if self.timeout_s <= 0 or self.max_attempts < 1:
            raise ConfigError("vlm.timeout_s must be > 0 and vlm.max_attempts >= 1")
        if self.backoff_base_s < 0 or self.backoff_max_s < self.backoff_base_s:
            raise ConfigError("vlm: need 0 <= backoff_base_s <= backoff_max_s")
        if not 0.0 <= self.backoff_jitter < 1.0:
            raise ConfigError("vlm.backoff_jitter must be in [0, 1)")
        if self.max_tokens < 64 or self.temperature < 0:
            raise ConfigError("vlm: max_tokens must be >= 64 and temperature >= 0")
        if self.image_max_side < 32:
            raise ConfigError("vlm.image_max_side must be >= 32")
        if self.image_format not in ("jpeg", "png"):
            raise ConfigError("vlm.image_format must be 'jpeg' or 'png'")
        if not 1 <= self.jpeg_quality <= 100:
            raise ConfigError("vlm.jpeg_quality must be in 1..100")
        if self.coordinates not in ("norm1000", "pixel"):
            raise ConfigError("vlm.coordinates must be 'norm1000' or 'pixel'")
        if self.coordinates == "pixel" and self.image_max_side > schema.COORD_MAX + 1:
            # The schema bounds every coordinate to 0..COORD_MAX for guided decoding.
            raise ConfigError(f"vlm.image_max_side must be <= {schema.COORD_MAX + 1} with "
                              "coordinates 'pixel' (the schema bounds coordinates to "
                              f"0..{schema.COORD_MAX})")
        if not 0.0 <= self.default_fragility <= 1.0:
            raise ConfigError("vlm.default_fragility must be in [0, 1]")
        priors = {}
        for key, value in dict(self.fragility_priors).items():
            value = float(value)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"vlm.fragility_priors.{key} must be in [0, 1]")
            priors[str(key).replace("_", " ").lower()] = value
        self.fragility_priors = priors
        if isinstance(self.depth, Mapping):
            self.depth = DepthConfig.from_params(self.depth)

    def retry_delay_s(self, retry: int) -> float:
        """Delay before retry ``retry + 1`` (0-based), before jitter and Retry-After (s)."""
        return min(self.backoff_max_s, self.backoff_base_s * (2.0 ** retry))

    def call_budget_s(self) -> float:
        """Worst-case wall time of one VLM perception (both exchanges of a repair), jitter
        included; what a client of the perception service should wait at least.

        Each exchange is ``max_attempts`` requests of at most ``timeout_s`` with the backoff
        delays between them (ChatTransport); an invalid first answer adds one more exchange.
        """
        delays = sum(self.retry_delay_s(k) for k in range(self.max_attempts - 1))
        exchange = self.max_attempts * self.timeout_s + delays * (1.0 + self.backoff_jitter)
        return 2.0 * exchange

    @classmethod
    def from_params(cls, params: Optional[Mapping[str, Any]],
                    depth: Optional[Mapping[str, Any]] = None) -> "VlmConfig":
        """Build from the ``vlm:`` mapping (and the ``depth:`` one); typos are errors."""
        params = dict(params or {})
        reject_unknown("vlm", params, {f.name for f in fields(cls)} - {"depth"})
        kwargs: Dict[str, Any] = {}
        casts = {"timeout_s": float, "max_attempts": int, "backoff_base_s": float,
                 "backoff_max_s": float, "backoff_jitter": float, "seed": int,
                 "max_tokens": int, "temperature": float, "image_max_side": int,
                 "jpeg_quality": int, "use_env_proxy": _to_bool, "default_fragility": float}
        for key, value in params.items():
            kwargs[key] = casts[key](value) if key in casts else value
        if "fragility_priors" in kwargs:
            kwargs["fragility_priors"] = dict(kwargs["fragility_priors"] or {})
        kwargs["depth"] = DepthConfig.from_params(depth)
        return cls(**kwargs)

    def fragility_prior(self, category: str) -> Tuple[float, str]:
        """(value, source): the prior for a category, by exact name then by word."""
        cat = category.lower().strip()
        if cat in self.fragility_priors:
            return self.fragility_priors[cat], f"prior for '{cat}'"
        for key in sorted(self.fragility_priors, key=len, reverse=True):
            if key in cat:
                return self.fragility_priors[key], f"prior for '{key}'"
        return self.default_fragility, "default prior"


def _to_bool(value: Any) -> bool:
    """A boolean parameter that may arrive as a string ("false" must not become True)."""
    if isinstance(value, str):
        if value.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if value.strip().lower() in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"not a boolean: {value!r}")
    return bool(value)


@dataclass
class VlmLatencyModel:
    """Seconds a real VLM call would take: prefill + completion tokens / decode rate."""

    prefill_s: float = field(default=0.35, metadata={
        "description": "Modelled prefill time of one VLM call (s)"})
    decode_tok_per_s: float = field(default=155.5, metadata={
        "description": "Modelled decode rate (tokens/s; the paper's 155.5)"})

    def __post_init__(self) -> None:
        if not (math.isfinite(self.prefill_s) and self.prefill_s >= 0.0):
            raise ConfigError("vlm_sim.latency.prefill_s must be >= 0")
        if not (math.isfinite(self.decode_tok_per_s) and self.decode_tok_per_s > 0.0):
            raise ConfigError("vlm_sim.latency.decode_tok_per_s must be > 0")

    def seconds(self, completion_tokens: int) -> float:
        return float(self.prefill_s + max(0, int(completion_tokens)) / self.decode_tok_per_s)


@dataclass
class VlmSimConfig:
    """The error model (``vlm_sim.*`` in config/perception.yaml, where each default's source
    is given; the defaults here are the same). :meth:`zero_noise` = a perfect VLM."""

    seed: int = field(default=0, metadata={
        "description": "Seed of the simulated VLM's error draws"})
    point_std: float = field(default=9.0, metadata={
        "description": "Gaussian noise on point_2d per axis (Qwen 0..1000 units)"})
    box_std: float = field(default=12.5, metadata={
        "description": "Gaussian noise on each bbox_2d edge (Qwen 0..1000 units)"})
    category_confusion_prob: float = field(default=0.03, metadata={
        "description": "Probability that a category is replaced by a partner "
                       "(vlm_sim.confusion_map)"})
    affordance_confusion_prob: float = field(default=0.05, metadata={
        "description": "Probability that the target's affordance type is replaced by another, "
                       "uniformly"})
    state_error_prob: float = field(default=0.02, metadata={
        "description": "Probability that an object's state is replaced by another"})
    fragility_std: float = field(default=0.1, metadata={
        "description": "Gaussian noise on fragility (clipped to [0, 1])"})
    miss_prob_small: float = field(default=0.5, metadata={
        "description": "Probability of missing an object at or below miss_min_area_px"})
    miss_min_area_px: float = field(default=100.0, metadata={
        "description": "Visible area (px) at or below which miss_prob_small applies"})
    miss_full_area_px: float = field(default=400.0, metadata={
        "description": "Visible area (px) from which an object is never missed"})
    image_token_px: int = field(default=32, metadata={
        "description": "Pixels per side of one image token (Qwen3-VL: 32)"})
    # system + user prompt text (counted once)
    prompt_text_tokens: int = field(default=420, metadata={
        "description": "Tokens of the prompt text (latency and token accounting)"})
    confusion_map: Dict[str, List[str]] = field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_CONFUSION_MAP.items()})
    latency: VlmLatencyModel = field(default_factory=VlmLatencyModel)

    def __post_init__(self) -> None:
        for name in ("category_confusion_prob", "affordance_confusion_prob",
                     "state_error_prob", "miss_prob_small"):
            value = float(getattr(self, name))
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"vlm_sim.{name} must be in [0, 1], got {value}")
            setattr(self, name, value)
        for name in ("point_std", "box_std", "fragility_std", "miss_min_area_px",
                     "miss_full_area_px"):
            value = float(getattr(self, name))
            if not (math.isfinite(value) and value >= 0.0):
                raise ConfigError(f"vlm_sim.{name} must be >= 0, got {value}")
            setattr(self, name, value)
        if self.miss_full_area_px < self.miss_min_area_px:
            raise ConfigError("vlm_sim: need miss_min_area_px <= miss_full_area_px")
        if int(self.image_token_px) < 1 or int(self.prompt_text_tokens) < 0:
            raise ConfigError("vlm_sim: image_token_px >= 1 and prompt_text_tokens >= 0")
        self.seed = int(self.seed)
        cleaned: Dict[str, List[str]] = {}
        for key, partners in dict(self.confusion_map or {}).items():
            if isinstance(partners, str):
                partners = [partners]
            names = [vlm_words(p.replace("_", " ")) for p in partners if str(p).strip()]
            if names:
                cleaned[vlm_words(str(key).replace("_", " "))] = names
        self.confusion_map = cleaned
        if isinstance(self.latency, Mapping):
            self.latency = VlmLatencyModel(**{k: float(v) for k, v in self.latency.items()})

    @classmethod
    def from_params(cls, params: Optional[Mapping[str, Any]]) -> "VlmSimConfig":
        params = dict(params or {})
        reject_unknown("vlm_sim", params, (f.name for f in fields(cls)))
        latency = dict(params.pop("latency", None) or {})
        reject_unknown("vlm_sim.latency", latency, ("prefill_s", "decode_tok_per_s"))
        return cls(latency=VlmLatencyModel(**{k: float(v) for k, v in latency.items()}),
                   **params)

    def zero_noise(self) -> "VlmSimConfig":
        """The same model with every error rate 0 (a perfect VLM)."""
        out = VlmSimConfig(**{f.name: getattr(self, f.name) for f in fields(self)})
        for name in ("point_std", "box_std", "category_confusion_prob",
                     "affordance_confusion_prob", "state_error_prob", "fragility_std",
                     "miss_prob_small"):
            setattr(out, name, 0.0)
        return out
