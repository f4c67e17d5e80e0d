"""The binomial logistic model with two nested random intercepts: items (completions) within clusters (occupations).

One row per item ``j`` of cluster ``i`` (a completion of an occupation): ``k_ij`` successes (male words) and
``m_ij`` failures (female words), and a fixed-effects design row ``x_i`` per cluster::

    k_ij | u_i, v_ij ~ Binomial(k_ij + m_ij, expit(x_i'beta + u_i + v_ij)),
    u_i ~ N(0, sigma_cluster^2),    v_ij ~ N(0, sigma_item^2)

:mod:`bias_utils.core.mixed` has only ``u_i``: the words of one occupation are exchangeable there, so a completion
that repeats "her" eight times counts as eight draws of the occupation's share. Here the words of one completion
share their ``v_ij`` too (words nested in completions nested in occupations). Items without a count carry no
information and are left out (the fit says how many were used), as are clusters without any item left.

How it is computed (and why)
----------------------------
* **Marginal likelihood by nested adaptive Gauss-Hermite quadrature.** Given ``t = x_i'beta + sigma_cluster z``, an
  item's integral over ``v`` is the one-level integral of :mod:`bias_utils.core.mixed` (the same mode-centred,
  curvature-scaled nodes, vectorised over items x outer nodes); a cluster's integrand in ``z``, ``phi(z)`` times the
  product of its items' integrals, is log-concave (each item's integral is a Gaussian convolution of a log-concave
  function), so the outer nodes are centred at its mode (a bracketed Newton solve on the exact first and second
  derivatives of the inner integrals) and scaled by its curvature there. :data:`N_NODES` = 100 nodes at each level
  (the golden tests check the log-likelihood against ``scipy.integrate`` on a small design, and at ``sigma_item =
  0`` and ``sigma_cluster = 0`` against the one-level model of :mod:`bias_utils.core.mixed`). Measured while this
  was written, on the published audit's completions with ``sigma_cluster = 0`` against ``quad``: 100 nodes erred by
  5e-6 (absolute, in the log-likelihood) at ``sigma_item = 4`` and by 3e-3 at 6.8, where the audit's fit lands
  (200 nodes: 6e-6, at six times the cost); past :data:`bias_utils.core.mixed.WIDE_SIGMA` the fit says so, and
  the row carries the note.
* **Penalised maximum likelihood, always**: ``log(sigma_cluster) + log(sigma_item)`` is added to the
  log-likelihood (the boundary-avoiding gamma(2, 0) priors of Chung et al. 2013, as the one-level model's default),
  so both SDs stay positive and are optimised on the log scale by BFGS with the exact gradient (posterior moments at
  the nodes). There is no plain-ML option: an SD of 0 is the one-level model.
* **Profile-likelihood interval** for one coefficient (the others and both SDs refitted with it held fixed, warm
  started), its bounds found by Brent's method on the likelihood-ratio statistic against the chi-square(1) quantile,
  decided at the cap: a side whose profile is still below the quantile at :data:`bias_utils.core.mixed.PROFILE_LIMIT`
  logits from 0 (an odds ratio past e^40, where :func:`bias_utils.core.mixed.drifted` reads a coefficient as
  unbounded) is infinite. Out there the profile is flat and its refits stop where the optimiser does (on the published
  completions a Brent root on that ridge moved between e^37 and e^40 with the machine), but a refit that stops short
  only overstates the LR, so "still inside at the cap" is decided the same way on every machine. The likelihood-ratio
  p refits with the coefficient at 0.

The model is slower than the one-level model (seconds per fit and interval, against milliseconds): it is one
sensitivity row of chapter 06, not a tool for permutation or leave-one-out loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import optimize, special
from scipy import stats as _st

from . import mixed, stats
from .errors import ParameterError, check_positive_int

__all__: list[str] = []

#: Gauss-Hermite nodes per level (items and clusters).
_N_NODES = 100
_GTOL = 1e-7  # BFGS: the gradient's largest entry at convergence (log-likelihood units per parameter)
_PROFILE_GTOL = 1e-5  # the profile's refits: an LR statistic to about 1e-5
_XTOL = 1e-2  # the profile bounds' tolerance in logits (1% on the odds-ratio scale)


def _item_integrals(k, n, eta, sigma, nodes, log_weights, start):
    """For items with counts ``k`` of ``n`` (arrays [J, 1]) at linear predictors ``eta`` [J, Q]: the log of
    ``int phi(v) p^k (1 - p)^(n - k) dv`` with ``p = expit(eta + sigma v)`` (no binomial coefficient), its first and
    second derivatives in ``eta`` and its derivative in ``sigma``, and the modes (warm starts for the next call)."""
    zhat = mixed.posterior_mode(k, n, eta, sigma, start)
    quad = mixed.quadrature(k, n, eta, sigma, zhat, nodes, log_weights)
    log_g = np.log(quad.scale) + np.log(quad.total) + quad.top - 0.5 * np.log(np.pi)
    return log_g, quad.d_eta, quad.d2_eta, quad.d_sigma, zhat


@dataclass
class _Nested:
    """The items used (positive counts), the cluster each belongs to, the clusters' designs and the rules."""

    k: np.ndarray  # [J, 1]
    n: np.ndarray  # [J, 1]
    cluster: np.ndarray  # [J] index into X's rows
    X: np.ndarray  # [I, q]
    const: float  # the binomial coefficients
    nodes: np.ndarray
    log_weights: np.ndarray
    k_cluster: np.ndarray = field(init=False)
    m_cluster: np.ndarray = field(init=False)
    item_modes: dict = field(init=False)
    cluster_modes: np.ndarray = field(init=False)

    def __post_init__(self):
        counts = np.bincount(self.cluster, minlength=len(self.X))
        self.k_cluster = np.bincount(self.cluster, self.k[:, 0], minlength=len(self.X))
        self.m_cluster = np.bincount(self.cluster, self.n[:, 0] - self.k[:, 0], minlength=len(self.X))
        assert (counts > 0).all()
        self.item_modes = {}
        self.cluster_modes = np.zeros(len(self.X))

    def _sum(self, values: np.ndarray) -> np.ndarray:
        """Item values [J, Q] summed per cluster: [I, Q]."""
        out = np.zeros((len(self.X), values.shape[1]))
        np.add.at(out, self.cluster, values)
        return out

    def _items(self, eta_items, s_item, key):
        start = self.item_modes.get(key)
        start = np.zeros_like(eta_items) if start is None or start.shape != eta_items.shape else start
        log_g, d1, d2, ds, zhat = _item_integrals(self.k, self.n, eta_items, s_item, self.nodes, self.log_weights,
                                                  start)
        self.item_modes[key] = zhat
        return log_g, d1, d2, ds

    def _outer_modes(self, eta, s_cluster, s_item):
        """Mode and curvature of each cluster's log integrand in z (a bracketed Newton solve)."""
        lo = np.minimum(s_cluster * self.k_cluster, -s_cluster * self.m_cluster)
        hi = np.maximum(s_cluster * self.k_cluster, -s_cluster * self.m_cluster)
        z = np.clip(self.cluster_modes, lo, hi)
        for _ in range(100):
            _, d1, d2, _ = self._items((eta + s_cluster * z)[self.cluster][:, None], s_item, "mode")
            f = s_cluster * self._sum(d1)[:, 0] - z
            curvature = s_cluster ** 2 * self._sum(d2)[:, 0] - 1
            lo, hi = np.where(f > 0, z, lo), np.where(f > 0, hi, z)
            new = z - f / np.minimum(curvature, -1e-12)
            new = np.where((new < lo) | (new > hi), 0.5 * (lo + hi), new)
            done = np.abs(new - z) < 1e-10 * (1 + np.abs(z))
            z = new
            if done.all():
                break
        _, _, d2, _ = self._items((eta + s_cluster * z)[self.cluster][:, None], s_item, "mode")
        self.cluster_modes = z
        return z, 1 / np.sqrt(np.maximum(1 - s_cluster ** 2 * self._sum(d2)[:, 0], 1e-12))

    def evaluate(self, beta, s_cluster, s_item):
        """(log-likelihood, gradient in (beta, sigma_cluster, sigma_item))."""
        eta = self.X @ beta
        zhat, scale = self._outer_modes(eta, s_cluster, s_item)
        z = zhat[:, None] + mixed.SQRT2 * scale[:, None] * self.nodes  # [I, Q]
        log_g, d1, _, ds = self._items((eta[:, None] + s_cluster * z)[self.cluster], s_item, "nodes")
        terms = self._sum(log_g) - 0.5 * z * z + self.log_weights
        top = terms.max(axis=-1, keepdims=True)
        mass = np.exp(terms - top)
        total = mass.sum(-1)
        loglik = self.const + np.sum(np.log(scale) + np.log(total) + top[:, 0] - 0.5 * np.log(np.pi))
        post = mass / total[:, None]
        score_eta = (post * self._sum(d1)).sum(-1)  # [I]
        grad = np.r_[self.X.T @ score_eta, (post * self._sum(d1) * z).sum(), (post * self._sum(ds)).sum()]
        return float(loglik), grad


@dataclass
class _NestedLogitFit:
    """A fitted nested model: ``coef`` indexed by ``names``, the two SDs, the log-likelihood at the estimate and the
    penalised objective that was maximised, how many clusters and items were used of how many given."""

    names: list[str]
    coef: pd.Series
    sigma_cluster: float
    sigma_item: float
    loglik: float
    objective: float
    converged: bool
    message: str
    n_clusters: int
    n_clusters_given: int
    n_items: int
    n_items_given: int
    data: _Nested = field(repr=False)
    theta: np.ndarray = field(repr=False)


def _objective(data: _Nested, theta: np.ndarray, fixed: dict[int, float]):
    """Minus the penalised log-likelihood and its gradient at theta = (free coefficients, log SDs) with the
    coefficients in ``fixed`` held at their values."""
    q = data.X.shape[1]
    beta = np.empty(q)
    free = [j for j in range(q) if j not in fixed]
    beta[free] = theta[:len(free)]
    for j, value in fixed.items():
        beta[j] = value
    log_sc, log_si = theta[len(free):]
    with np.errstate(over="ignore"):
        s_cluster, s_item = np.exp(log_sc), np.exp(log_si)
    loglik, grad = data.evaluate(beta, s_cluster, s_item)
    objective = loglik + log_sc + log_si
    gradient = np.r_[grad[:q][free], grad[q] * s_cluster + 1, grad[q + 1] * s_item + 1]
    return -objective, -gradient


def _maximise(data: _Nested, start: np.ndarray, fixed: dict[int, float], gtol: float = _GTOL):
    """(theta, penalised log-likelihood, converged) from ``start``, the coefficients in ``fixed`` held."""
    result = optimize.minimize(lambda th: _objective(data, th, fixed), start, jac=True, method="BFGS",
                               options={"gtol": gtol, "maxiter": 500})
    # BFGS's "precision loss" stop at an optimum the rounding of the quadrature cannot improve is a success
    ok = bool(result.success) or np.abs(result.jac).max() < 1e-4
    return result.x, -float(result.fun), ok


def fit_nested_logit(successes, failures, clusters, design, *, names=None, n_nodes: int = _N_NODES
                     ) -> _NestedLogitFit:
    """Fit ``successes | u, v ~ Binomial(successes + failures, expit(design[cluster] @ beta + u + v))`` with a random
    intercept ``u`` per cluster and ``v`` per item (row), both normal with their SDs estimated, by penalised maximum
    marginal likelihood (nested adaptive Gauss-Hermite, ``n_nodes`` per level; module docstring).

    ``successes``, ``failures``: one value per item (>= 0); ``clusters``: each item's cluster, an integer row of
    ``design`` (0 .. rows - 1); ``design``: a DataFrame (its columns name the coefficients) or a 2-D array with
    ``names``, one row per cluster, intercept included."""
    k, m = mixed.counts(successes, "successes"), mixed.counts(failures, "failures")
    cluster = np.asarray(clusters)
    if len(k) != len(m) or cluster.shape != k.shape:
        raise ParameterError(f"successes, failures and clusters must have one value per item each, got {len(k)}, "
                             f"{len(m)} and {cluster.shape}")
    X, names = mixed.design_matrix(design, names, _n_rows(design))
    if not np.issubdtype(cluster.dtype, np.integer) or (cluster < 0).any() or (cluster >= len(X)).any():
        raise ParameterError(f"clusters must be integer rows of design (0 to {len(X) - 1})")
    n_nodes = check_positive_int(n_nodes, "n_nodes")
    used = (k + m) > 0
    present = np.unique(cluster[used])
    if len(present) <= X.shape[1]:
        raise ParameterError(f"successes/failures: {len(present)} clusters have any count, need more than the "
                             f"{X.shape[1]} coefficients")
    mixed.check_rank(X[present], names)
    index = np.full(len(X), -1)
    index[present] = np.arange(len(present))
    n = k[used] + m[used]
    const = float(np.sum(special.gammaln(n + 1) - special.gammaln(k[used] + 1) - special.gammaln(m[used] + 1)))
    t, w = mixed.hermgauss(n_nodes)
    data = _Nested(k[used][:, None], n[:, None], index[cluster[used]], X[present], const, t, np.log(w) + t ** 2)
    # start from the one-level model's fit on the clusters' totals, the items' SD at 1
    one = mixed.fit_mixed_logit(data.k_cluster, data.m_cluster, data.X)
    start = np.r_[one.coef.to_numpy(), np.log(max(one.sigma, 0.1)), 0.0]
    theta, objective, ok = _maximise(data, start, {})
    q = X.shape[1]
    s_cluster, s_item = np.exp(theta[q:])
    messages = [] if ok else ["BFGS did not converge"]
    drift = [nm for nm, b in zip(names, theta[:q]) if abs(b) > mixed.HUGE]
    if drift:
        messages.append(f"{', '.join(drift)}: beyond {mixed.HUGE:g} logits (separation)")
    wide = [f"{what} {s:.3g}" for what, s in (("the clusters' SD", s_cluster), ("the items' SD", s_item))
            if s > mixed.WIDE_SIGMA]
    if wide:
        messages.append(f"{', '.join(wide)}: beyond {mixed.WIDE_SIGMA:g}, where the quadrature is not validated")
    return _NestedLogitFit(names=names, coef=pd.Series(theta[:q], index=names), sigma_cluster=float(s_cluster),
                           sigma_item=float(s_item), loglik=float(objective - theta[q] - theta[q + 1]),
                           objective=objective, converged=ok, message="; ".join(messages),
                           n_clusters=len(present), n_clusters_given=len(X), n_items=int(used.sum()),
                           n_items_given=len(k), data=data, theta=theta)


def _n_rows(design) -> int:
    return len(design) if hasattr(design, "__len__") else 0


def _nested_loglik(successes, failures, clusters, design, coef, sigma_cluster: float, sigma_item: float, *,
                   n_nodes: int = _N_NODES) -> float:
    """The marginal log-likelihood of :func:`fit_nested_logit`'s model (without the penalty) at coefficients ``coef``
    and the two SDs (both >= 0)."""
    k, m = mixed.counts(successes, "successes"), mixed.counts(failures, "failures")
    cluster = np.asarray(clusters)
    X, _ = mixed.design_matrix(design, None, _n_rows(design))
    used = (k + m) > 0
    present = np.unique(cluster[used])
    index = np.full(len(X), -1)
    index[present] = np.arange(len(present))
    n = k[used] + m[used]
    const = float(np.sum(special.gammaln(n + 1) - special.gammaln(k[used] + 1) - special.gammaln(m[used] + 1)))
    t, w = mixed.hermgauss(check_positive_int(n_nodes, "n_nodes"))
    data = _Nested(k[used][:, None], n[:, None], index[cluster[used]], X[present], const, t, np.log(w) + t ** 2)
    return data.evaluate(np.asarray(coef, dtype=float), float(sigma_cluster), float(sigma_item))[0]


class _NestedProfile:
    """The profile of the fit's objective in coefficient j: LR statistic 2(objective - profile objective) at b, each
    b refitted once (warm-started from the nearest b done, or from a named start), so a root search sees one
    function; a refit that did not converge may be redone from another start, the lower LR kept."""

    def __init__(self, fit: _NestedLogitFit, j: int):
        self.fit, self.j, self.calls = fit, j, 0
        self.done: dict[float, tuple[np.ndarray, float, bool]] = {
            float(fit.coef.iloc[j]): (np.delete(fit.theta, j), 0.0, True)}
        self.tried: set[tuple[float, float]] = set()

    def __call__(self, b: float, start: float | None = None) -> float:
        """The LR at b. ``start`` (a b done) warm-starts the refit instead of the nearest b done; a b already done
        whose refit did not converge is refitted from a ``start`` not tried yet, and the better refit (the lower LR:
        one that stops short of the optimum only overstates it) is kept."""
        b = float(b)
        origin = min(self.done, key=lambda c: abs(c - b)) if start is None else float(start)
        if b not in self.done or (origin != b and not self.done[b][2] and (b, origin) not in self.tried):
            theta, objective, ok = _maximise(self.fit.data, self.done[origin][0], {self.j: b}, _PROFILE_GTOL)
            self.calls += 1
            self.tried.add((b, origin))
            lr = 2 * (self.fit.objective - objective)
            if b not in self.done or lr < self.done[b][1]:
                self.done[b] = (theta, lr, ok)
        return self.done[b][1]


def _nested_bound(profile: _NestedProfile, estimate: float, side: int, cutoff: float) -> tuple[float, bool]:
    """``(b, determined)``: the b on ``side`` where the profile's LR reaches ``cutoff``, decided at the cap.

    Steps of 0.5, 1.5, 3.5, ... logits out from the estimate, the last one at the cap itself (``side`` x PROFILE_LIMIT
    logits from 0, where :func:`bias_utils.core.mixed.drifted` reads a coefficient as unbounded), each refit warm-
    started from the step before (whatever was refitted there before). A refit that stops short of its optimum
    overstates the LR, so a step below the cut-off is inside the interval whether or not its refit converged: a
    profile still inside at the cap is infinite there on every machine, wherever an optimiser stops on the flat
    ridge out there. Otherwise the first step past the cut-off closes a bracket and Brent's method finds the
    crossing to XTOL logits; where that step is the cap and its refit did not converge, the bound is not determined
    (``False``, reported infinite)."""
    cap = side * mixed.PROFILE_LIMIT
    inner, d = estimate, 0.5
    while True:
        b = cap if side * (estimate + side * d) >= mixed.PROFILE_LIMIT else estimate + side * d
        if profile(b, start=inner) < cutoff:  # the estimate itself is at LR 0
            if b == cap:
                return side * np.inf, True
            inner, d = b, 2 * d + 0.5
            continue
        if not np.isfinite(profile(b)) or (b == cap and not profile.done[float(b)][2]):
            return side * np.inf, False
        return optimize.brentq(lambda x: profile(x) - cutoff, *sorted((inner, b)), xtol=_XTOL), True


def nested_row(fit: _NestedLogitFit, name: str, *, level: float = 0.95, test: str = "mixed_logit_nested",
               group_a: str | None = None, group_b: str = "") -> dict:
    """A row of the project's statistics tables (:data:`bias_utils.core.stats.STAT_COLUMNS`) for coefficient ``name``
    as an odds ratio: the likelihood-ratio statistic (df 1) and its chi-square p, ``exp`` of the coefficient and of
    its profile-likelihood bounds, ``n`` the clusters used; beside them ``n_clusters``, ``n_clusters_given``,
    ``n_items`` (items with a count), ``sigma`` (the clusters' SD), ``sigma_item`` (the items') and ``note``.
    ``group_a`` defaults to the coefficient's name."""
    if name not in fit.names:
        raise ParameterError(f"name must be one of the fit's coefficients {fit.names}, got {name!r}")
    if not (isinstance(level, float) and 0 < level < 1):
        raise ParameterError(f"level must be a float between 0 and 1, got {level!r}")
    if (fit.coef.abs() > mixed.HUGE).any():
        # a profile from a diverged start reaches NaN refits: no interval is better than a wrong one
        raise ValueError(f"the nested model has no finite estimate on these data ({fit.message})")
    j = fit.names.index(name)
    estimate = float(fit.coef.iloc[j])
    profile = _NestedProfile(fit, j)
    lr = max(profile(0.0), 0.0)
    cutoff = float(_st.chi2.ppf(level, 1))
    (low, low_ok), (high, high_ok) = (_nested_bound(profile, estimate, side, cutoff) for side in (-1, 1))
    notes = [fit.message] if fit.message else []
    if not all(ok for _, _, ok in profile.done.values()):
        notes.append("a refit of the profile did not converge")
    for bound, word, determined in ((low, "lower", low_ok), (high, "upper", high_ok)):
        if not determined:
            notes.append(f"the {word} bound is not determined (the profile's refit {mixed.PROFILE_LIMIT:g} logits "
                         "out did not converge: the likelihood is flat there), so it is reported as infinite")
        elif not np.isfinite(bound):
            notes.append(f"the {word} bound lies beyond {mixed.PROFILE_LIMIT:g} logits: the profile there is still "
                         "inside the cut-off (flat, e.g. separation), so it is reported as infinite")
    row = dict.fromkeys(stats.STAT_COLUMNS, np.nan)
    row.update(test=test, group_a=name if group_a is None else group_a, group_b=group_b, statistic=float(lr),
               df=1.0, p=float(_st.chi2.sf(lr, 1)), adj_method="", effect="odds_ratio",
               effect_size=float(np.exp(estimate)), ci_low=float(np.exp(low)), ci_high=float(np.exp(high)),
               n=fit.n_clusters, n_clusters=fit.n_clusters, n_clusters_given=fit.n_clusters_given,
               n_items=fit.n_items, sigma=fit.sigma_cluster, sigma_item=fit.sigma_item, note="; ".join(notes))
    return row
