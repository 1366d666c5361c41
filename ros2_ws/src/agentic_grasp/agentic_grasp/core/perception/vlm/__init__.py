"""Perception through a vision-language model (Qwen3-VL served by vLLM), or its simulation.

- :mod:`.schema`: the structured answer asked of the VLM, its prompt and its validation;
- :mod:`.answer`: the frame sent to the VLM and the answer read back (interpretation);
- :mod:`.client`: the OpenAI-compatible client, :class:`~.client.VlmBackend`;
- :mod:`.sim`: the simulated VLM, which writes the answer a VLM would give;
- :mod:`.config`: the settings of both.
"""
