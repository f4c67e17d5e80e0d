"""A binomial logistic model with a random intercept per cluster, fitted by maximum likelihood.

One row per cluster ``i`` (an occupation): ``k_i`` successes (e.g. male words) and ``m_i`` failures (female words),
real and >= 0 (expected counts are allowed), and a fixed-effects design row ``x_i``::

    k_i | u_i ~ Binomial(k_i + m_i, expit(x_i'beta + u_i)),    u_i ~ N(0, sigma^2)

The cluster, not the word, is the unit: a cluster's words share its ``u_i``, so one talkative occupation counts as
one draw of ``u``, however many words it wrote. Clusters with ``k_i + m_i = 0`` carry no information and are left
out (the fit says how many were used of how many given).

How it is computed (and why)
----------------------------
* **Marginal likelihood by adaptive Gauss-Hermite quadrature**, per cluster and vectorised over clusters x nodes:
  with ``u = sigma z`` the integrand ``exp(g(z))``, ``g(z) = k log p + m log(1-p) - z^2/2``, is strictly log-concave;
  the nodes are centred at its mode (a bracketed Newton solve) and scaled by ``(-g'')^(-1/2)`` there, so a cluster
  with 80 words (a sharp integrand far from ``z = 0``) is as accurate as one with a single word. The integrand of a
  cluster with one or two words and a large ``sigma`` is far from Gaussian (a smoothed step); hence
  :data:`N_NODES` = 60 nodes, widened to :data:`WIDE_NODES` = 200 where sigma goes beyond the range 60 are
  validated for (:data:`VALID_SIGMA`). Against ``scipy.integrate.quad`` on the audit's counts (x0.37, x1, x1.5, at
  the fit and at coefficients up to 9 logits), measured while this was written: 60 nodes erred by at most 5e-9
  (relative) up to sigma 3.5 but 4e-5 at sigma 4.9 and 2e-4 at 6; 200 nodes by at most 2e-8 at sigma 4.9 and 4e-7
  at 6, at three to six times the cost (chapter 11's permutation-calibrated fits: 0.17 s against 1.06 s). A
  profile bound can take sigma far beyond its estimate (a build with 33 informative occupations reached 4.9 at the
  upper bound, where 60 nodes overstated the log-likelihood). So with ``n_nodes=None`` (the default) a fit whose
  sigma passes 3.5 is refitted with 200 nodes, and an interval or test whose profile refits pass it is computed
  again on such a refit (its note says so); past :data:`WIDE_SIGMA` = 6 the fit, and a bound that reaches it, say
  so. The golden test checks both rules against ``quad``. The log-likelihood
  includes the binomial coefficient (``gammaln``; for non-integer counts it is a constant).
* **sigma is a real number, not a log**: the likelihood is even in ``sigma`` (``z`` and ``-z`` are exchangeable),
  so ``sigma = 0`` is an ordinary interior point, the optimiser never meets a boundary, and ``|sigma|`` is
  reported. By plain maximum likelihood the boundary fit (``sigma = 0``, the binomial GLM) and a fit started at
  ``sigma = 1`` are both run and the better kept; when they tie, ``sigma`` is reported as exactly 0.
* **The default adds log(sigma)** to the log-likelihood (the boundary-avoiding gamma(2, 0) prior on sigma of
  Chung, Rabe-Hesketh, Dorie, Gelman & Liu 2013, Psychometrika 78: 685-709). With a few words per cluster plain
  ML puts sigma at 0 in a fair share of samples and underestimates it on average; a talkative cluster is then
  weighted as if its words were independent. Measured while this module was written, on tests/test_mixed.py's
  designs (a) and (b) (1,500 samples each, true sigma 1): plain ML put sigma at 0 in 8% and 17% of samples and its
  likelihood-ratio test of a null group effect rejected in 6.1% and 6.9% at the 5% level; with the penalty (1,000
  samples each) 5.4% and 5.0%. The tests print plain ML's rate on 100 samples of (b) beside the penalised one.
  The interval and the test below are then those of the penalised likelihood; ``boundary_avoiding=False`` gives
  plain ML.
* **Newton's method** with the exact gradient and Hessian of the quadrature (posterior-weighted scores at the nodes;
  eigenvalues made positive where the Hessian is not negative definite, backtracking, steps capped at 5 logits).
  Wald standard errors come from the same Hessian.
* **Profile-likelihood interval** for one coefficient: the other coefficients and ``sigma`` are refitted with the
  coefficient held fixed, and the signed root of the likelihood-ratio statistic is solved for the chi-square(1)
  quantile by a bracketed Newton step (its slope is the constrained score). A side whose profile stays below the
  quantile at the cap, ``PROFILE_LIMIT`` logits from 0, has an infinite bound (separation: the data allow any value
  there), said in the note. The likelihood-ratio p refits with the coefficient at 0, so the interval excludes 0
  exactly when ``p < 1 - level``.
* **Small samples** (:func:`coefficient_test`'s ``n_permutations``): with few words per cluster and many fixed
  effects (chapter 11's design: a covariate within ten categories, tests/test_mixed.py's design (c)) the LR's null
  distribution is wider than chi-square(1), even with sigma known, and the chi-square test rejects a true null in
  about 10% of samples. Permuting the tested column among clusters alike in every other column gives the LR's null
  distribution without that approximation (and without a binomial model for non-integer counts): ``p`` is the
  permutation p, and the interval's cut-off is the permuted LR that ``p < 1 - level`` requires the LR to pass.

One concept over 600 lines: one likelihood (the random-intercept binomial model by adaptive Gauss-Hermite
quadrature) and what is read from it: the fit, the profile interval, the likelihood-ratio test and its permutation
calibration all evaluate the same function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import special
from scipy import stats as _st

from . import stats
from .errors import ParameterError, check_count, check_positive_int, check_seed, is_number

__all__: list[str] = []

#: Gauss-Hermite nodes per cluster, and the number a fit or an interval widens to where sigma passes the range the
#: first is validated for (the golden test checks the log-likelihood against scipy.integrate.quad: 60 nodes to 1e-8
#: relative up to sigma 3.5; 200 nodes to 1e-8 up to sigma 4.9 and 1e-6 up to 6, WIDE_SIGMA).
_N_NODES = 60
_WIDE_NODES = 200
_VALID_SIGMA = 3.5
#: The cap: a profile bound further than this from 0 (in logits: an odds ratio beyond e^40) is infinite.
PROFILE_LIMIT = 40.0
#: What :func:`mixed_row` reports: the coefficient exponentiated (a group indicator's odds ratio) or as it is (the
#: change in log-odds per unit of a covariate).
_EFFECTS = ("odds_ratio", "log_odds_slope")

_MAX_STEP = 5.0  # logits: a Newton step longer than this is shortened (the first steps from a poor start)
_TOL = 1e-11  # half the Newton decrement at convergence (log-likelihood units)
_TIE = 1e-8  # log-likelihood gain below which sigma > 0 is no better than sigma = 0
HUGE = 15.0  # |coefficient| in logits past which a fit is reported as drifting to infinity (separation)
WIDE_SIGMA = 6.0  # past this sigma a fit or a profile bound says so (WIDE_NODES validated up to sigma 6)


@lru_cache(maxsize=8)
def hermgauss(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.hermite.hermgauss(n_nodes)


def posterior_mode(k, n, eta, sigma, start):
    """Mode of g(z) = k(eta + sigma z) - n softplus(eta + sigma z) - z^2/2, elementwise (the arrays broadcast): g' is
    decreasing and its root lies in [min(sigma k, -sigma m), max(...)]; Newton steps from ``start`` that leave the
    bracket bisect it."""
    lo, hi = np.minimum(sigma * k, -sigma * (n - k)), np.maximum(sigma * k, -sigma * (n - k))
    z = np.clip(start, lo, hi)
    for _ in range(100):
        p = special.expit(eta + sigma * z)
        f = sigma * (k - n * p) - z
        lo, hi = np.where(f > 0, z, lo), np.where(f > 0, hi, z)
        new = z + f / (1 + sigma ** 2 * n * p * (1 - p))
        outside = (new < lo) | (new > hi)
        new = np.where(outside, 0.5 * (lo + hi), new)
        done = np.abs(new - z) < 1e-12 * (1 + np.abs(z))
        z = new
        if done.all():
            break
    return z


SQRT2 = np.sqrt(2.0)


@dataclass
class Quadrature:
    """What :func:`quadrature` returns per cluster: the integral's pieces (its log is ``log(scale) + log(total) +
    top``, no binomial coefficient, less log(pi) / 2) and, where asked, its derivatives in the linear predictor eta
    and in sigma."""

    scale: np.ndarray
    total: np.ndarray
    top: np.ndarray
    d_eta: np.ndarray | None = None
    d2_eta: np.ndarray | None = None
    d_sigma: np.ndarray | None = None
    d2_eta_sigma: np.ndarray | None = None
    d2_sigma: np.ndarray | None = None


def quadrature(k, n, eta, sigma, zhat, nodes, log_weights, derivatives=True, sigma_curvature=False) -> Quadrature:
    """Adaptive Gauss-Hermite quadrature of ``int phi(v) p^k (1 - p)^(n - k) dv``, ``p = expit(eta + sigma v)``, at
    the nodes centred on the posterior modes ``zhat`` (``k``, ``n`` and ``sigma`` broadcast against ``eta``), and the
    posterior moments of the complete-data score that give its first and second derivatives (the second in sigma
    only with ``sigma_curvature``). The random-intercept model's clusters and the nested model's items both call it."""
    p = special.expit(eta + sigma * zhat)
    scale = 1 / np.sqrt(1 + sigma ** 2 * n * p * (1 - p))
    k, n, sigma = k[..., None], n[..., None], np.asarray(sigma)[..., None]
    # [..., nodes] arrays, a fit's largest: each step overwrites a buffer whose value no later step reads, with the
    # same operations in the same order as out of place (the same bits; benchmarks/README.md): six buffers, not twenty
    z = zhat[..., None] + SQRT2 * scale[..., None] * nodes
    e = eta[..., None] + sigma * z
    tail = np.abs(e)
    np.exp(np.negative(tail, out=tail), out=tail)  # one exponential for both log(1 + e^e) and expit(e)
    spare = np.empty_like(tail)
    terms = np.maximum(e, 0)
    terms += np.log1p(tail, out=spare)
    terms *= n  # n * softplus(e)
    terms = np.subtract(np.multiply(k, e, out=spare), terms, out=terms)
    terms -= np.multiply(np.multiply(z, 0.5, out=spare), z, out=spare)
    terms += log_weights
    top = terms.max(axis=-1, keepdims=True)
    mass = np.exp(np.subtract(terms, top, out=terms), out=terms)
    out = Quadrature(scale, mass.sum(axis=-1), top[..., 0])
    if not derivatives:
        return out
    post = np.divide(mass, out.total[..., None], out=mass)
    pz = np.where(e >= 0, 1.0, tail)
    pz /= np.add(tail, 1, out=tail)
    r = np.subtract(k, np.multiply(n, pz, out=e), out=e)
    weighted = np.multiply(post, r, out=spare)  # post * r
    out.d_eta = weighted.sum(-1)
    inner = np.multiply(n, pz, out=tail)
    inner *= np.subtract(1, pz, out=pz)
    inner = np.subtract(np.multiply(r, r, out=pz), inner, out=inner)
    curvature = np.multiply(post, inner, out=inner)
    out.d2_eta = curvature.sum(-1) - out.d_eta ** 2
    out.d_sigma = np.multiply(weighted, z, out=weighted).sum(-1)
    if sigma_curvature:
        curvature_z = np.multiply(curvature, z, out=weighted)
        out.d2_eta_sigma = curvature_z.sum(-1) - out.d_eta * out.d_sigma
        out.d2_sigma = np.multiply(curvature_z, z, out=curvature_z).sum(-1) - out.d_sigma ** 2
    return out


@dataclass
class _Clusters:
    """The clusters used (positive totals), their designs and the quadrature rule; modes kept as warm starts.

    ``X`` is [B, clusters, coefficients]: B designs of the same clusters (the data's own, B = 1, or permutations of
    one column), fitted side by side; parameters are [B, coefficients + 1] (the last is sigma)."""

    k: np.ndarray
    n: np.ndarray
    X: np.ndarray
    const: np.ndarray
    nodes: np.ndarray
    log_weights: np.ndarray
    mode: np.ndarray = field(init=False)

    def __post_init__(self):
        self.mode = np.zeros(self.X.shape[:2])

    @classmethod
    def build(cls, k, m, X, n_nodes):
        n = k + m
        t, w = hermgauss(n_nodes)
        const = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(m + 1) - 0.5 * np.log(np.pi)
        return cls(k, n, X[None], const, t, np.log(w) + t ** 2)

    def designs(self, X: np.ndarray) -> _Clusters:
        """The same clusters with the designs X [B, clusters, coefficients], warm-started at this one's modes."""
        other = replace(self, X=X)
        other.mode = np.broadcast_to(self.mode[:1], X.shape[:2]).copy()
        return other

    def _modes(self, eta, sigma, rows):
        z = posterior_mode(self.k, self.n, eta, sigma, self.mode[rows])
        self.mode[rows] = z
        return z

    def evaluate(self, theta, derivatives=True, penalty=False, rows=slice(None)):
        """Log-likelihoods at theta [b, coefficients + 1] of the designs ``rows``, and their gradients and Hessians
        (quadrature of the posterior moments of the complete-data score at the same nodes); with ``penalty``, plus
        log|sigma| and its derivatives (-inf at sigma = 0)."""
        X = self.X[rows]
        beta, sigma = theta[:, :-1], theta[:, -1:]
        eta = np.einsum("bnq,bq->bn", X, beta)
        zhat = self._modes(eta, sigma, rows)
        quad = quadrature(self.k, self.n, eta, sigma, zhat, self.nodes, self.log_weights, derivatives,
                          sigma_curvature=True)
        loglik = np.sum(self.const + np.log(quad.scale) + np.log(quad.total) + quad.top, axis=-1)
        s = sigma[:, 0]
        if penalty:
            with np.errstate(divide="ignore"):
                loglik = loglik + np.log(np.abs(s))
        if not derivatives:
            return loglik, None, None
        q = X.shape[-1]
        grad = np.empty((len(theta), q + 1))
        grad[:, :q], grad[:, q] = np.einsum("bnq,bn->bq", X, quad.d_eta), quad.d_sigma.sum(-1)
        hess = np.empty((len(theta), q + 1, q + 1))
        hess[:, :q, :q] = np.swapaxes(X * quad.d2_eta[..., None], 1, 2) @ X
        hess[:, :q, q] = hess[:, q, :q] = np.einsum("bnq,bn->bq", X, quad.d2_eta_sigma)
        hess[:, q, q] = quad.d2_sigma.sum(-1)
        if penalty:
            nonzero = s != 0
            grad[nonzero, q] += 1 / s[nonzero]
            hess[nonzero, q, q] -= 1 / s[nonzero] ** 2
        return loglik, grad, hess


def _ascent_step(grad, hess):
    """Newton steps [b, f] for a maximum on the eigenvalues of -hess made positive (|lambda|, at least 1e-12 of the
    largest), capped in length. A direction of separation keeps its tiny curvature, so its steps stay about one
    logit long (score and curvature fall together) until the gain is below the tolerance."""
    lam, vec = np.linalg.eigh(-hess)
    lam = np.maximum(np.abs(lam), 1e-12 * np.maximum(1.0, np.abs(lam).max(axis=-1, keepdims=True)))
    step = (vec @ ((np.swapaxes(vec, 1, 2) @ grad[..., None])[..., 0] / lam)[..., None])[..., 0]
    length = np.abs(step).max(axis=-1, keepdims=True)
    return step * np.minimum(1.0, _MAX_STEP / np.maximum(length, 1e-300))


def _newton(data: _Clusters, theta, free, penalty=False, max_iter=200):
    """Maximise every design's objective over the ``free`` entries of theta [B, coefficients + 1]; the rest stay
    fixed. Returns (theta, objective, grad, hess, converged), each with the leading B."""
    theta = np.array(theta, dtype=float)
    ll, g, h = data.evaluate(theta, penalty=penalty)
    active, converged = np.ones(len(theta), bool), np.zeros(len(theta), bool)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if not len(idx):
            break
        gf, hf = g[idx][:, free], h[idx][:, free][:, :, free]
        step = _ascent_step(gf, hf)
        gain = (gf * step).sum(-1)
        small = gain / 2 < _TOL
        converged[idx[small]], active[idx[small]] = True, False
        idx, step, gain = idx[~small], step[~small], gain[~small]
        t = np.ones(len(idx))
        while len(idx):
            cand = theta[idx]
            cand[:, free] += t[:, None] * step
            ll_c, g_c, h_c = data.evaluate(cand, penalty=penalty, rows=idx)
            accept = (ll_c >= ll[idx] + 1e-4 * t * gain) | (t < 1e-10)
            up = accept & (ll_c >= ll[idx])
            theta[idx[up]], ll[idx[up]], g[idx[up]], h[idx[up]] = cand[up], ll_c[up], g_c[up], h_c[up]
            # no ascent along the step at any length: at the optimum to the rounding of the likelihood
            stall = accept & ~up
            converged[idx[stall]], active[idx[stall]] = gain[stall] / 2 < 1e-6, False
            idx, step, gain, t = idx[~accept], step[~accept], gain[~accept], t[~accept] / 2
    return theta, ll, g, h, converged


def _one(data: _Clusters, theta, free, penalty=False, method=None):
    """(theta, objective, grad, hess, converged) of one design (B = 1) from the start ``theta``."""
    return tuple(part[0] for part in (method or _newton)(data, np.asarray(theta, dtype=float)[None], free, penalty))


def _maximise(data: _Clusters, theta, free, penalty=False):
    """:func:`_newton`, with sigma free: a start at sigma = 0 stays there (its score is 0 by symmetry), which is the
    maximum only where the curvature in sigma is negative; otherwise the fit restarts from sigma = 0.1."""
    out = _newton(data, theta, free, penalty)
    stuck = np.flatnonzero((out[0][:, -1] == 0) & (out[3][:, -1, -1] > 0)) if free[-1] else []
    if len(stuck):
        restart = out[0][stuck]
        restart[:, -1] = 0.1
        sub = data.designs(data.X[stuck])
        again = _newton(sub, restart, free, penalty)
        for whole, part in zip(out, again):
            whole[stuck] = part
    return out


@dataclass
class _MixedLogitFit:
    """A fitted random-intercept logistic model. ``coef``/``se`` are indexed by ``names`` (se: Wald, from the
    curvature of the objective); ``sigma`` is the random-intercept SD (exactly 0 on the boundary, which the
    boundary-avoiding penalty never reaches); ``loglik`` the marginal log-likelihood at the estimate and ``objective``
    what was maximised (``loglik + log(sigma)`` with the penalty, else ``loglik``); ``n_clusters`` the clusters with
    counts, of ``n_clusters_given``."""

    names: list[str]
    coef: pd.Series
    se: pd.Series
    sigma: float
    loglik: float
    objective: float
    boundary_avoiding: bool
    converged: bool
    message: str
    n_clusters: int
    n_clusters_given: int
    sigma_fixed: bool
    n_nodes: int
    adaptive: bool
    data: _Clusters = field(repr=False)
    theta: np.ndarray = field(repr=False)


@dataclass
class _CoefficientTest:
    """One coefficient: estimate and Wald SE (log-odds), the profile-likelihood interval at ``level`` (an infinite
    bound where the profile never reaches its cut-off), the likelihood-ratio statistic for coefficient = 0 and its
    p, and a note saying what is unusual (empty when nothing is). ``cutoff`` is the LR value the interval's bounds
    reach: the chi-square(1) quantile, or with ``n_permutations`` the permutation distribution's (then ``p`` is the
    permutation p); ``p_chi2`` is the asymptotic p either way."""

    name: str
    estimate: float
    se: float
    ci_low: float
    ci_high: float
    level: float
    lr_statistic: float
    p: float
    p_chi2: float
    cutoff: float
    n_permutations: int
    note: str


def counts(values, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{name} must be real numbers (counts), got {type(values).__name__}") from exc
    if arr.ndim != 1:
        raise ParameterError(f"{name} must be one value per cluster (1-D), got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        raise ParameterError(f"{name} must be finite and >= 0; {int(bad.sum())} values are not "
                             f"(first at position {int(np.flatnonzero(bad)[0])}: {arr[bad][0]!r})")
    return arr


def design_matrix(design, names, n: int) -> tuple[np.ndarray, list[str]]:
    if isinstance(design, pd.DataFrame):
        if names is not None:
            raise ParameterError("names: give names only with an array design (a DataFrame names its columns)")
        names = [str(c) for c in design.columns]
    try:
        X = np.asarray(design, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ParameterError("design must hold numbers (dummy-code categories first)") from exc
    if X.ndim != 2 or X.shape[0] != n:
        raise ParameterError(f"design must be one row per cluster ({n} rows) and one column per coefficient, "
                             f"got shape {X.shape}")
    if not np.isfinite(X).all():
        raise ParameterError(f"design has {int((~np.isfinite(X)).sum())} missing or infinite values")
    names = [f"x{j}" for j in range(X.shape[1])] if names is None else [str(s) for s in names]
    if len(names) != X.shape[1] or len(set(names)) != len(names):
        raise ParameterError(f"names must be {X.shape[1]} distinct column names, got {names!r}")
    return X, names


def check_rank(X: np.ndarray, names: list[str]) -> None:
    """Every column must add to the span of the ones before it (among the clusters used)."""
    rank = 0
    for j in range(X.shape[1]):
        r = np.linalg.matrix_rank(X[:, :j + 1])
        if r == rank:
            raise ParameterError(f"design: column {names[j]!r} is constant zero or a combination of the columns "
                                 f"before it among the clusters with words; drop it")
        rank = r


def fit_mixed_logit(successes, failures, design, *, names=None, sigma: float | None = None,
                    boundary_avoiding: bool = True, n_nodes: int | None = None) -> _MixedLogitFit:
    """Fit ``successes | u ~ Binomial(successes + failures, expit(design @ beta + u))``, ``u ~ N(0, sigma^2)`` per
    cluster (row), by maximum marginal likelihood (adaptive Gauss-Hermite, ``n_nodes`` per cluster).

    ``design``: a DataFrame (its columns name the coefficients) or a 2-D array with ``names``; include the intercept
    column yourself. ``sigma``: None estimates it; a number fixes it (0 gives the binomial GLM).
    ``boundary_avoiding`` (default): maximise ``loglik + log(sigma)``, the gamma(2, 0) prior on sigma of Chung et
    al. (2013), so that sigma is never estimated at 0; plain maximum likelihood (False) puts sigma at 0 in a fair
    share of samples with few words per cluster, and then weights one talkative cluster as if its words were
    independent: the likelihood-ratio test's false-positive rate rises (tests/test_mixed.py measures both)."""
    k, m = counts(successes, "successes"), counts(failures, "failures")
    if len(k) != len(m):
        raise ParameterError(f"successes and failures must have one value per cluster each, got {len(k)} and "
                             f"{len(m)}")
    X, names = design_matrix(design, names, len(k))
    adaptive = n_nodes is None
    n_nodes = _N_NODES if adaptive else check_positive_int(n_nodes, "n_nodes")
    if sigma is not None and not (is_number(sigma) and np.isfinite(sigma) and sigma >= 0):
        raise ParameterError(f"sigma must be None (estimated) or a number >= 0, got {sigma!r}")
    if not isinstance(boundary_avoiding, bool):
        raise ParameterError(f"boundary_avoiding must be True or False, got {boundary_avoiding!r}")
    used = (k + m) > 0
    if used.sum() <= X.shape[1]:
        raise ParameterError(f"successes/failures: {int(used.sum())} clusters have any count, need more than the "
                             f"{X.shape[1]} coefficients")
    check_rank(X[used], names)
    fit = _fit(_Clusters.build(k[used], m[used], X[used], n_nodes), names, sigma, boundary_avoiding, len(k), adaptive)
    if adaptive and fit.sigma > _VALID_SIGMA:
        fit = _widened(fit)
    return fit


def _valid_sigma(n_nodes: int) -> float:
    """The sigma up to which a rule of ``n_nodes`` nodes is validated (module docstring)."""
    return WIDE_SIGMA if n_nodes >= _WIDE_NODES else _VALID_SIGMA


def _widened(fit: _MixedLogitFit) -> _MixedLogitFit:
    """The same fit with :data:`WIDE_NODES` nodes per cluster (sigma beyond the range the default is validated for)."""
    data = fit.data
    k, n, X = data.k, data.n, data.X[0]
    return _fit(_Clusters.build(k, n - k, X, _WIDE_NODES), fit.names, fit.sigma if fit.sigma_fixed else None,
                fit.boundary_avoiding, fit.n_clusters_given, False)


def _fit(data: _Clusters, names: list[str], sigma, boundary_avoiding: bool, n_given: int,
         adaptive: bool) -> _MixedLogitFit:
    """:func:`fit_mixed_logit` on clusters already checked and built."""
    k = data.k
    q = data.X.shape[-1]
    beta_only, both = np.r_[np.ones(q, bool), False], np.ones(q + 1, bool)
    penalty = sigma is None and boundary_avoiding
    glm = _one(data, np.r_[np.zeros(q), sigma or 0.0], beta_only)
    if sigma is not None:
        best, free = glm, beta_only
    else:
        # from sigma = 1 and, without the penalty, from the boundary (kept there only where it is a maximum in
        # sigma): the better is kept
        fits = [_one(data, np.r_[glm[0][:-1], 1.0], both, penalty)]
        fits += [] if penalty else [_one(data, glm[0], both, method=_maximise)]
        best, free = max(fits, key=lambda f: f[1]), both
        if not penalty and best[1] <= glm[1] + _TIE:
            best, free = glm, beta_only
    theta, objective, _, h, ok = best
    theta[-1] = abs(theta[-1])
    loglik = objective - np.log(theta[-1]) if penalty else objective
    se = _wald_se(h, free, q)
    messages = [] if ok else ["Newton's method did not converge"]
    drift = [nm for nm, b in zip(names, theta[:q]) if abs(b) > HUGE]
    if drift:
        messages.append(f"{', '.join(drift)}: beyond {HUGE:g} logits (separation: the likelihood keeps rising as "
                        f"it grows; the estimate and its Wald SE are not finite in effect)")
    if not np.isfinite(se).all():
        messages.append("the observed information is singular: Wald SEs are NaN")
    valid = _valid_sigma(len(data.nodes))
    if theta[-1] > valid and not adaptive:
        messages.append(f"sigma {theta[-1]:.3g}: beyond {valid:g} the quadrature of {len(data.nodes)} nodes loses "
                        f"accuracy for clusters with one or two words (raise n_nodes to check)")
    return _MixedLogitFit(names=names, coef=pd.Series(theta[:q], index=names), se=pd.Series(se, index=names),
                         sigma=float(theta[-1]), loglik=float(loglik), objective=float(objective),
                         boundary_avoiding=penalty, converged=ok, message="; ".join(messages),
                         n_clusters=len(k), n_clusters_given=n_given, sigma_fixed=sigma is not None,
                         n_nodes=len(data.nodes), adaptive=adaptive, data=data, theta=theta)


def _wald_se(hess, free, q) -> np.ndarray:
    """SEs of the coefficients from the inverse of the observed information over the free parameters."""
    info = -hess[np.ix_(free, free)]
    try:
        np.linalg.cholesky(info)
    except np.linalg.LinAlgError:
        return np.full(q, np.nan)
    return np.sqrt(np.diag(np.linalg.inv(info))[:q])


def _mixed_loglik(successes, failures, design, coef, sigma: float, *, n_nodes: int | None = None) -> float:
    """The marginal log-likelihood of :func:`fit_mixed_logit`'s model (without the penalty), at coefficients ``coef``
    (in the design's column order) and random-intercept SD ``sigma`` (clusters without counts add 0), with
    ``n_nodes`` per cluster (None: the fit's rule, :data:`N_NODES` up to :data:`VALID_SIGMA`, else
    :data:`WIDE_NODES`)."""
    if n_nodes is None:
        n_nodes = _N_NODES if is_number(sigma) and abs(sigma) <= _VALID_SIGMA else _WIDE_NODES
    k, m = counts(successes, "successes"), counts(failures, "failures")
    X, _ = design_matrix(design, None, len(k))
    coef = np.asarray(coef, dtype=float)
    if coef.shape != (X.shape[1],):
        raise ParameterError(f"coef must hold {X.shape[1]} values (one per design column), got shape {coef.shape}")
    used = (k + m) > 0
    data = _Clusters.build(k[used], m[used], X[used], check_positive_int(n_nodes, "n_nodes"))
    if not (is_number(sigma) and np.isfinite(sigma)):
        raise ParameterError(f"sigma must be a finite number, got {sigma!r}")
    return float(data.evaluate(np.r_[coef, float(sigma)][None], derivatives=False)[0][0])


class _Profile:
    """The profile of the fit's objective in coefficient j: the others (and sigma, unless fixed) refitted with
    beta_j = b, warm-started from the nearest b already fitted."""

    def __init__(self, fit: _MixedLogitFit, j: int):
        self.fit, self.j = fit, j
        self.free = np.r_[np.ones(len(fit.names), bool), not fit.sigma_fixed]
        self.free[j] = False
        self.done: dict[float, np.ndarray] = {fit.coef.iloc[j]: fit.theta}

    def __call__(self, b: float) -> tuple[float, float, bool]:
        """(LR statistic 2(l_hat - l_p(b)), the constrained score d l_p / db, converged)."""
        start = self.done[min(self.done, key=lambda c: abs(c - b))].copy()
        start[self.j] = b
        theta, ll, g, _, ok = _one(self.fit.data, start, self.free, self.fit.boundary_avoiding, _maximise)
        self.done[b] = theta
        return 2 * (self.fit.objective - ll), float(g[self.j]), ok


def drifted(coefficient: float) -> bool:
    """Whether a fitted coefficient (logits) has run past PROFILE_LIMIT or to infinity: separation, where the number
    is where Newton stopped, not an estimate; what reads a fit prints it as unbounded."""
    return not np.isfinite(coefficient) or abs(coefficient) > PROFILE_LIMIT


def _bound(profile: _Profile, estimate: float, se: float, side: int, target: float) -> tuple[float, bool]:
    """The b on ``side`` (+1 above, -1 below) where the signed root sqrt(LR) reaches ``target``; inf where it never
    does before the cap, PROFILE_LIMIT logits from 0 on that side (where :func:`drifted` reads a coefficient as
    unbounded): the profile evaluated at the cap decides it, so the answer does not hang on where a refit on a flat
    ridge past the cap stops. Newton steps in the root (nearly linear in b) on the distance d from the estimate,
    bisecting inside a known bracket; without one, d at most doubles (plus one) per step. An estimate that drifted
    past PROFILE_LIMIT (separation) is searched from PROFILE_LIMIT, where the profile is as flat as at the estimate:
    from the estimate itself the side towards 0 would end PROFILE_LIMIT logits short of where it rises."""
    clipped = not abs(float(estimate)) <= PROFILE_LIMIT
    estimate = float(np.clip(estimate, -PROFILE_LIMIT, PROFILE_LIMIT))
    if clipped:
        lr, _, ok = profile(estimate)
        if np.sqrt(max(lr, 0.0)) >= target:
            # the fit ran so far past PROFILE_LIMIT that the profile there is already past the cut-off: the interval
            # lies wholly beyond it, unbounded away from 0 and not found towards 0 (searching from here put both
            # bounds at PROFILE_LIMIT itself, an "interval" e^40 to e^40)
            return (side * np.inf if side * estimate > 0 else np.nan), ok
    limit = PROFILE_LIMIT - side * estimate  # the distance to the cap
    if limit <= 0:
        return side * np.inf, True
    inner, outer, ok_all = 0.0, None, True
    d = min(se * target if np.isfinite(se) and se > 0 else 1.0, limit)
    for _ in range(100):
        lr, score, ok = profile(estimate + side * d)
        ok_all &= ok
        root = np.sqrt(max(lr, 0.0))
        if abs(root - target) < 1e-9:
            break
        if root < target:
            inner = d
        else:
            outer = d
        slope = -side * score / root if root > 0 else 0.0  # d root / d d
        new = d + (target - root) / slope if slope > 0 else np.nan
        if outer is None:
            if d >= limit:
                return side * np.inf, ok_all
            far = min(2 * d + 1.0, limit)
            d = new if np.isfinite(new) and d < new <= far else far
        else:
            d = new if np.isfinite(new) and inner < new < outer else 0.5 * (inner + outer)
            if outer - inner < 1e-10 * (1 + abs(estimate) + d):
                break
    else:
        ok_all = False
    return estimate + side * d, ok_all


_BLOCK = 10  # permuted designs fitted side by side (larger blocks measured slower: the arrays leave the cache)


def _permuted_lr(fit: _MixedLogitFit, j: int, null_theta: np.ndarray, null_objective: float, n_permutations: int,
                 seed: int) -> np.ndarray:
    """The LR statistic of coefficient j with its column permuted within strata (clusters alike in every other
    column), each refitted from the null fit (the null model does not hold the column, so its fit is shared); the
    permuted designs are fitted side by side, a block at a time."""
    data = fit.data
    X = data.X[0]
    _, stratum = np.unique(np.delete(X, j, axis=1), axis=0, return_inverse=True)
    strata = [idx for idx in (np.flatnonzero(stratum == s) for s in range(stratum.max() + 1)) if len(idx) > 1]
    column = X[:, j]
    if not strata or all(np.ptp(column[idx]) == 0 for idx in strata):
        raise ParameterError(f"n_permutations: {fit.names[j]!r} cannot be permuted: no two clusters alike in the "
                             f"other columns differ in it")
    rng = np.random.default_rng(seed)
    free = np.r_[np.ones(len(fit.names), bool), not fit.sigma_fixed]
    out = []
    for start in range(0, n_permutations, _BLOCK):
        designs = np.repeat(X[None], min(_BLOCK, n_permutations - start), axis=0)
        for design in designs:
            for idx in strata:
                design[idx, j] = column[rng.permutation(idx)]
        block = data.designs(designs)
        theta = np.repeat(null_theta[None], len(designs), axis=0)
        out.append(2 * (_maximise(block, theta, free, fit.boundary_avoiding)[1] - null_objective))
    return np.maximum(np.concatenate(out), 0.0)


def check_permutations(n_permutations, *, level: float = 0.95, name: str = "n_permutations") -> int:
    """``n_permutations`` as :func:`coefficient_test` at ``level`` takes it: 0 (the chi-square(1) reference), or
    enough relabellings for the cut-off to exist (at least 1/(1 - level) - 1), and at most
    ``errors.max_resamples()``; a ``ParameterError`` naming ``name`` otherwise. Callers whose fits catch a
    ``ValueError`` (a design too small to fit) check it at their door, so a bad count is not read as such a note."""
    if not (isinstance(level, float) and 0 < level < 1):
        raise ParameterError(f"level must be a float between 0 and 1, got {level!r}")
    alpha = 1 - level
    n_permutations = check_count(n_permutations, name, minimum=0)
    if n_permutations and _cutoff_rank(n_permutations, alpha) < 1:
        raise ParameterError(f"{name} must be 0 or at least {math.ceil(1 / alpha - 1 + 1e-9)} for a "
                             f"{level:g} interval, got {n_permutations}")
    return n_permutations


def _cutoff_rank(n_permutations: int, alpha: float) -> int:
    # the r-th largest permuted LR is the cut-off: p < alpha exactly when fewer than r of them reach the LR
    return math.ceil(alpha * (n_permutations + 1) - 1 - 1e-9)


def _coefficient_test(fit: _MixedLogitFit, name: str, *, level: float = 0.95, n_permutations: int = 0,
                     seed: int = 0) -> _CoefficientTest:
    """Profile-likelihood interval at ``level`` and likelihood-ratio test of ``name`` = 0 (the model refitted
    without it, sigma refitted too unless the fit fixed it).

    ``n_permutations`` (0, or at least 1/(1 - level) - 1; 99 or more in practice) replaces the chi-square(1) reference
    for small samples: the coefficient's column is permuted among clusters alike in every other column (within a
    category x group cell of a design of such dummies; across all clusters of a two-group design), ``seed`` drawing
    the permutations, and the model refitted each time. ``p`` is then the permutation p (floor 1/(K+1)), and the
    interval holds the values whose LR stays at or below the permutation distribution's cut-off, the value the LR
    must pass for ``p < 1 - level``; so the interval still excludes 0 exactly when ``p < 1 - level``. With few words
    per cluster and many fixed effects the LR's null distribution is wider than chi-square(1) and the uncalibrated
    test rejects too often (tests/test_mixed.py). The permutations' null is that clusters alike in the other
    columns are exchangeable: the tested column unrelated to their words."""
    if name not in fit.names:
        raise ParameterError(f"name must be one of the fit's coefficients {fit.names}, got {name!r}")
    n_permutations = check_permutations(n_permutations, level=level)
    rank = _cutoff_rank(n_permutations, 1 - level)
    seed = check_seed(seed)
    j = fit.names.index(name)
    estimate, se = float(fit.coef.iloc[j]), float(fit.se.iloc[j])
    profile = _Profile(fit, j)
    lr, _, ok_zero = profile(0.0)
    lr = max(lr, 0.0)
    p_chi2 = float(_st.chi2.sf(lr, 1))
    cutoff, p = float(_st.chi2.ppf(level, 1)), p_chi2
    if n_permutations:
        null = _permuted_lr(fit, j, profile.done[0.0], fit.objective - lr / 2, n_permutations, seed)
        cutoff = float(np.sort(null)[::-1][rank - 1])
        p = float(stats.permutation_p(lr, null))
    low, ok_low = _bound(profile, estimate, se, -1, np.sqrt(cutoff))
    high, ok_high = _bound(profile, estimate, se, +1, np.sqrt(cutoff))
    # the SD refitted at 0 and nearest each bound (a bisection may stop between two refits)
    refits = {word: abs(profile.done[min(profile.done, key=lambda c: abs(c - bound))][-1]) if np.isfinite(bound)
              else 0.0 for bound, word in ((0.0, "zero"), (low, "lower"), (high, "upper"))}
    valid = _valid_sigma(fit.n_nodes)
    if fit.adaptive and max(refits.values()) > valid:
        wide = _coefficient_test(_widened(fit), name, level=level, n_permutations=n_permutations, seed=seed)
        why = (f"the profile's refits reached sigma {max(refits.values()):.3g}, past the {valid:g} that {fit.n_nodes} "
               f"nodes are validated for: fitted and profiled again with {_WIDE_NODES}")
        return replace(wide, note="; ".join(n for n in (why, wide.note) if n))
    notes = [] if fit.converged else [f"the fit did not converge ({fit.message})"]
    notes += [] if ok_low and ok_high and ok_zero else ["a refit of the profile did not converge"]
    for bound, word in ((low, "lower"), (high, "upper")):
        if refits[word] > valid:
            notes.append(f"the {word} bound refits sigma {refits[word]:.3g}, beyond the {valid:g} up to which "
                         f"the quadrature of {fit.n_nodes} nodes is validated (raise n_nodes to check)")
        if np.isnan(bound):
            notes.append(f"the {word} bound was not found: the fit ran past {PROFILE_LIMIT:g} logits (separation) "
                         f"and the profile there is already past the cut-off, so the bound lies beyond e^"
                         f"{PROFILE_LIMIT:g}")
        elif not np.isfinite(bound):
            notes.append(f"the {word} bound is infinite: the profile likelihood never falls by the cut-off on that "
                         f"side (within {PROFILE_LIMIT:g} logits of 0; e.g. separation)")
    return _CoefficientTest(name=name, estimate=estimate, se=se, ci_low=float(low), ci_high=float(high), level=level,
                           lr_statistic=float(lr), p=p, p_chi2=p_chi2, cutoff=cutoff, n_permutations=n_permutations,
                           note="; ".join(notes))


def mixed_row(fit: _MixedLogitFit, name: str, *, effect: str = "odds_ratio", level: float = 0.95,
              n_permutations: int = 0, seed: int = 0, test: str = "mixed_logit_lr", group_a: str | None = None,
              group_b: str = "") -> dict:
    """A row of the project's statistics tables (:data:`bias_utils.core.stats.STAT_COLUMNS`) for coefficient ``name``
    (:func:`coefficient_test`): the likelihood-ratio statistic (df 1) and its p (chi-square or permutation), the
    effect as an odds ratio (``exp`` of the coefficient and of its profile bounds) or as the log-odds slope, ``n``
    the clusters used; beside them ``n_clusters``, ``n_clusters_given``, ``sigma``, ``p_chi2``, ``cutoff``,
    ``n_permutations`` and ``note``. ``group_a`` defaults to the coefficient's name."""
    if effect not in _EFFECTS:
        raise ParameterError(f"effect must be one of {_EFFECTS}, got {effect!r}")
    t = _coefficient_test(fit, name, level=level, n_permutations=n_permutations, seed=seed)
    scale = np.exp if effect == "odds_ratio" else float
    notes = [s for s in (fit.message, t.note) if s]
    row = dict.fromkeys(stats.STAT_COLUMNS, np.nan)
    row.update(test=test, group_a=name if group_a is None else group_a, group_b=group_b,
               statistic=t.lr_statistic,
               df=1.0, p=t.p, adj_method="", effect=effect, effect_size=float(scale(t.estimate)),
               ci_low=float(scale(t.ci_low)), ci_high=float(scale(t.ci_high)), n=fit.n_clusters,
               n_clusters=fit.n_clusters, n_clusters_given=fit.n_clusters_given, sigma=fit.sigma,
               p_chi2=t.p_chi2, cutoff=t.cutoff, n_permutations=t.n_permutations,
               note="; ".join(dict.fromkeys(notes)))
    return row
