"""Forward hooks on a decoder's hidden states: erase, record, replay.

A transformers decoder's hidden state ``h`` (the one ``output_hidden_states`` returns and the embeddings read) is the
output of one module: decoder layer ``h − 1`` for ``h`` < L, the final norm for the last (:func:`state_modules`).
Hooking those modules changes a state where the model computes it, so every computation of the package (the next
word, generation, the embeddings) runs through the change unaltered. Three hooks:

* :func:`erasing` replaces states by an eraser's image (an affine map in ``concept_erasure``'s ``LeaceEraser``
  form, I − P as a few directions and a bias) at every position, and renames the model while it is open so that no
  model-keyed cache mixes the erased model with the unhooked one;
* :func:`recording` keeps the unhooked states of every forward pass;
* :func:`replaying` serves them back, pass by pass, instead of running the blocks below a state, so that several
  interventions at one state share the unhooked computation below it (equal to the bit: the same kernels on the same
  batches).

They know nothing of what is erased; chapter 12's erasure of the gender concept (``intrinsic_extrinsic.erasure``)
fits the erasers and calls them.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Mapping, Sequence

import torch
from concept_erasure import LeaceEraser

from ..core.errors import ParameterError

__all__: list[str] = []


def state_modules(model) -> dict[int, torch.nn.Module]:
    """``{hidden state: module whose output it is}`` for states 1..L of a transformers decoder: decoder layer
    ``h − 1`` for ``h`` < L, the final norm for L (transformers returns its output as the last hidden state). A
    backend without them (a server, a GGUF run by llama.cpp) is a :class:`ParameterError`."""
    torch_model = getattr(model, "model", None)
    backbone = model.backbone() if isinstance(torch_model, torch.nn.Module) else None
    layers, norm = getattr(backbone, "layers", None), getattr(backbone, "norm", None)
    if not isinstance(layers, torch.nn.ModuleList) or not isinstance(norm, torch.nn.Module) \
            or len(layers) != model.n_layers:
        raise ParameterError(f"model: {getattr(model, 'name', model)!r} has no transformers decoder layers and final "
                             "norm to hook; erasure needs a local transformers decoder")
    return {**{h: layers[h - 1] for h in range(1, model.n_layers)}, model.n_layers: norm}


@contextmanager
def erasing(model, erasers: Mapping[int, LeaceEraser], tag: str):
    """While open, ``model``'s hidden state ``h`` is ``erasers[h]`` of what it was, at every position (forward hooks
    on :func:`state_modules`, put first so that transformers records the erased state), and ``model.model_id``
    ends in ``--erased-<tag>`` so that no model-keyed cache mixes the two models. The hooks go and the id comes back
    on leaving, whatever happens. An empty ``erasers`` changes nothing. Nesting is refused (the id would name one
    erasure of two)."""
    if not erasers:
        yield model
        return
    modules = state_modules(model)
    unknown = sorted(set(erasers) - set(modules))
    if unknown:
        raise ParameterError(f"layers: hidden states {unknown} cannot be erased; the model's are 1 to {model.n_layers}")
    if "--erased-" in model.model_id:
        raise ParameterError(f"model: {model.model_id} is already under an erasure; leave it before another")
    prepared: dict[tuple[int, torch.dtype, torch.device], tuple] = {}

    def hook_for(state: int):
        eraser = erasers[state]

        def hook(module, args, output):
            hidden = output[0] if isinstance(output, tuple) else output
            key = (state, hidden.dtype, hidden.device)
            if key not in prepared:  # the eraser in the states' own precision, once per device
                prepared[key] = tuple(None if t is None else t.to(hidden.device, hidden.dtype)
                                      for t in (eraser.proj_left, eraser.proj_right, eraser.bias))
            erased = LeaceEraser(*prepared[key])(hidden)
            return (erased, *output[1:]) if isinstance(output, tuple) else erased
        return hook

    original = model.model_id
    handles = [modules[h].register_forward_hook(hook_for(h), prepend=True) for h in sorted(erasers)]
    model.model_id = f"{original}--erased-{tag}"
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()
        model.model_id = original


@contextmanager
def recording(model, states: Sequence[int]):
    """While open, every forward pass of ``model`` appends, for each hidden state of ``states``, the state as the
    unhooked model computes it to ``{state: [one tensor per pass]}`` (yielded), in the order of the passes."""
    modules = state_modules(model)
    found: dict[int, list[torch.Tensor]] = {s: [] for s in states}

    def hook_for(state: int):
        def hook(module, args, output):
            found[state].append((output[0] if isinstance(output, tuple) else output).detach().clone())
        return hook

    handles = [modules[s].register_forward_hook(hook_for(s)) for s in states]
    try:
        yield found
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def replaying(model, state: int, recorded: Sequence[torch.Tensor]):
    """While open, ``model`` computes nothing below hidden state ``state``: the decoder blocks before it pass their
    input through, and the module whose output is ``state`` returns, pass by pass, the state :func:`recording` took
    on the same batches (the eraser hooked there still erases it); the blocks above run as usual. A pass whose batch
    does not match the recorded one's shape, or one pass more than were recorded, is a ``RuntimeError``: the
    replay must follow the recording call by call."""
    backbone = model.backbone()
    at = state_modules(model)[state]
    below = list(backbone.layers[:state - 1]) if state < model.n_layers else list(backbone.layers)
    passes = iter(recorded)

    def through(hidden_states, *args, **kwargs):
        return hidden_states

    def replay(hidden_states, *args, **kwargs):
        stored = next(passes, None)
        if stored is None or stored.shape != hidden_states.shape:
            raise RuntimeError(f"erasure replay at hidden state {state}: a pass of shape {tuple(hidden_states.shape)} "
                               f"where the recording holds {None if stored is None else tuple(stored.shape)}")
        return stored

    for module in below:
        module.forward = through
    at.forward = replay
    try:
        yield
    finally:
        for module in [*below, at]:
            del module.forward  # the class's own forward again
