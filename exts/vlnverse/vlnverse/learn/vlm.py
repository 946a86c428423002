"""A local Hugging Face vision-language model as an MLLM chat model (``model.name: transformers``).

It lives in the learning layer because it runs torch; ``vlnverse.run.models`` names it and
imports this module on first use, so evaluating API models never imports torch or transformers.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..run.chat_models import ChatModel, ChatModelParams, Generation
from ..run.models import register_model


@dataclass(kw_only=True)
class TransformersParams(ChatModelParams):
    """``model.params`` of ``transformers``."""

    path: str
    device: str = "cpu"
    dtype: str = "auto"


@register_model("transformers")
class TransformersVLM(ChatModel):
    """A Hugging Face vision-language model loaded from a local folder (never downloaded).

    ``path`` is the model folder (config + safetensors weights; remote code and pickled ``.bin``
    weights are never loaded); ``device`` (``cpu``, ``cuda``...) and
    ``dtype`` (``auto``, ``float16``, ``bfloat16``, ``float32``). ``transformers`` is imported
    when the model is built; a missing package or folder is a clear ``ConfigError``.
    """

    kind = "transformers"
    Params = TransformersParams

    def __init__(self, *, path: str, device: str = "cpu", dtype: str = "auto", **kwargs: Any):
        folder = Path(path).expanduser()
        super().__init__(model=folder.name, **kwargs)
        if not (folder / "config.json").is_file():
            raise ConfigError("no model folder (config.json and weights) here", file=folder,
                              field="model.params.path", expected="a local Hugging Face model folder; nothing is downloaded")
        try:
            import transformers  # first: it is the one usually missing (torch is a slow import)
            import torch
        except ImportError:
            raise ConfigError("the 'transformers' package is not installed", field="model.name",
                              expected="pip install transformers (the 'transformers' model loads local weights only)") from None
        auto = getattr(transformers, "AutoModelForImageTextToText", None) or transformers.AutoModelForVision2Seq
        torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
        self.processor = transformers.AutoProcessor.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
        try:  # safetensors weights only: a pickled pytorch_model.bin could run code when loaded
            net = auto.from_pretrained(folder, local_files_only=True, torch_dtype=torch_dtype, use_safetensors=True,
                                       trust_remote_code=False)
        except OSError as exc:
            raise ConfigError(f"no loadable safetensors weights ({str(exc).splitlines()[0] if str(exc) else 'OSError'})",
                              file=folder, field="model.params.path",
                              expected="a model folder with *.safetensors weights (pickled .bin weights are not loaded)") from None
        self.net = net.to(device).eval()
        self.device = device

    def _complete(self, messages: list[dict[str, str]], images: list[bytes]) -> Generation:
        import io

        import torch
        from PIL import Image

        pics = [Image.open(io.BytesIO(b)).convert("RGB") for b in images]
        chat = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in messages]
        if pics:
            last = max(i for i, m in enumerate(chat) if m["role"] == "user")
            chat[last]["content"] = [{"type": "image"} for _ in pics] + chat[last]["content"]
        prompt = self.processor.apply_chat_template(chat, add_generation_prompt=True)
        inputs = self.processor(text=prompt, images=pics or None, return_tensors="pt").to(self.device)
        with torch.no_grad():
            out = self.net.generate(**inputs, max_new_tokens=self.params["max_tokens"],
                                    do_sample=self.params["temperature"] > 0,
                                    **({"temperature": self.params["temperature"]} if self.params["temperature"] > 0 else {}))
        n_in = inputs["input_ids"].shape[1]
        text = self.processor.batch_decode(out[:, n_in:], skip_special_tokens=True)[0]
        return Generation(text=text, prompt_tokens=int(n_in), completion_tokens=int(out.shape[1] - n_in), requests=1)
