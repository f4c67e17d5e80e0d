"""Forward hooks on a decoder's hidden states: erase, record, replay.

A transformers decoder's hidden state ``h`` (the one ``output_hidden_states`` returns and the embeddings read) is the
output of one module: decoder layer ``h − 1`` for ``h`` < L, the final norm for the last (:func:`state_modules`).
Hooking those modules changes a state where the model computes it, so every computation of the package (the next
word, generation, the embeddings) runs through the change unaltered. Three hooks:

* :func:`erasing` replaces states by an eraser's image (an affine map in ``concept_erasure``'s ``LeaceEraser``
  form, I − P as a few directions and a bias) at every position, and renames the model while it is open so that no
  model-keyed cache mixes the erased model with the unhooked one;
* :func:`recording` keeps the input ids and the unhooked states of every forward pass;
* :func:`replaying` serves them back, pass by pass, instead of running the blocks below a state, so that several
  interventions at one state share the unhooked computation below it (equal to the bit: the same kernels on the same
  batches), checking that each pass has the recorded pass's input ids.

They know nothing of what is erased; chapter 12's erasure of the gender concept (``intrinsic_extrinsic.erasure``)
fits the erasers and calls them.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
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


@dataclass
class Recording:
    """What :func:`recording` kept of a run of forward passes, in their order: each pass's input ``ids`` and, per
    recorded hidden state, its unhooked value (``states``: ``{state: [one tensor per pass]}``)."""

    ids: list[torch.Tensor] = field(default_factory=list)
    states: dict[int, list[torch.Tensor]] = field(default_factory=dict)


def _input_ids(args: tuple, kwargs: dict) -> torch.Tensor:
    """The token ids an input embedding was called with (positionally in every transformers decoder we hook)."""
    return args[0] if args else next(iter(kwargs.values()))


@contextmanager
def recording(model, states: Sequence[int]):
    """While open, every forward pass of ``model`` appends its input ids and, for each hidden state of ``states``, the
    state as the unhooked model computes it to the :class:`Recording` yielded, in the order of the passes."""
    modules = state_modules(model)
    found = Recording([], {s: [] for s in states})

    def keep_ids(module, args, kwargs):
        found.ids.append(_input_ids(args, kwargs).detach().clone())

    def hook_for(state: int):
        def hook(module, args, output):
            found.states[state].append((output[0] if isinstance(output, tuple) else output).detach().clone())
        return hook

    handles = [model.backbone().get_input_embeddings().register_forward_pre_hook(keep_ids, with_kwargs=True)]
    handles += [modules[s].register_forward_hook(hook_for(s)) for s in states]
    try:
        yield found
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def replaying(model, recorded: Recording, state: int):
    """While open, ``model`` computes nothing below hidden state ``state``: the decoder blocks before it pass their
    input through, and the module whose output is ``state`` returns, pass by pass, the state :func:`recording` took
    (the eraser hooked there still erases it); the blocks above run as usual. The replay must follow the recording
    call by call, or it would serve one batch's states to another: a pass whose input ids differ from the recorded
    pass's (a reordered batch of equal shape included), a pass more than were recorded, or leaving with recorded passes
    unused is a ``RuntimeError``. The forward each block had (its class's, or one a library such as accelerate put on
    the instance) comes back on leaving."""
    backbone = model.backbone()
    at = state_modules(model)[state]
    below = list(backbone.layers[:state - 1]) if state < model.n_layers else list(backbone.layers)
    served = recorded.states[state]
    count = [0, 0]  # passes whose ids were checked, passes served

    def check_ids(module, args, kwargs):
        ids, n = _input_ids(args, kwargs), count[0]
        if n >= len(recorded.ids) or not torch.equal(recorded.ids[n].to(ids.device), ids):
            have = "none" if n >= len(recorded.ids) else f"other ids, shape {tuple(recorded.ids[n].shape)}"
            raise RuntimeError(f"erasure replay at hidden state {state}: pass {n + 1} has input ids of shape "
                               f"{tuple(ids.shape)} where the recording holds {have}")
        count[0] += 1

    def through(hidden_states, *args, **kwargs):
        return hidden_states

    def replay(hidden_states, *args, **kwargs):
        stored = served[count[1]]
        count[1] += 1
        return stored.to(hidden_states.device)

    saved = {module: vars(module).get("forward") for module in [*below, at]}
    handle = backbone.get_input_embeddings().register_forward_pre_hook(check_ids, with_kwargs=True)
    for module in below:
        module.forward = through
    at.forward = replay
    try:
        yield
        if count[0] != len(recorded.ids):
            raise RuntimeError(f"erasure replay at hidden state {state}: {len(recorded.ids) - count[0]} of the "
                               f"{len(recorded.ids)} recorded passes were not replayed")
    finally:
        handle.remove()
        for module, forward in saved.items():
            if forward is None:
                del module.forward  # the class's own forward again
            else:
                module.forward = forward
