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
  with 80 words (a sharp integrand far from ``z = 0``) is as accurate as one with a single word.
  The log-likelihood includes the binomial coefficient (``gammaln``; for non-integer counts it is a constant).
* **sigma is a real number, not a log**: the likelihood is even in ``sigma`` (``z`` and ``-z`` are exchangeable),
  so ``sigma = 0`` is an ordinary interior point, the optimiser never meets a boundary, and ``|sigma|`` is
  reported. By plain maximum likelihood the boundary fit (``sigma = 0``, the binomial GLM) and a fit started at
  ``sigma = 1`` are both run and the better kept; when they tie, ``sigma`` is reported as exactly 0.
* **The default adds log(sigma)** to the log-likelihood (the boundary-avoiding gamma(2, 0) prior on sigma of
  Chung, Rabe-Hesketh, Dorie, Gelman & Liu 2013, Psychometrika 78: 685-709). With a few words per cluster plain
  ML puts sigma at 0 in 8-17% of samples and underestimates it on average; a talkative cluster is then weighted as
  if its words were independent, and the likelihood-ratio test of a group effect rejects a true null in about 6-7%
  of samples at the 5% level (tests/test_mixed.py). With the penalty sigma stays positive and the level holds.
  The interval and the test below are then those of the penalised likelihood; ``boundary_avoiding=False`` gives
  plain ML.
* **Newton's method** with the exact gradient and Hessian of the quadrature (posterior-weighted scores at the nodes;
  eigenvalues made positive where the Hessian is not negative definite, backtracking, steps capped at 5 logits).
  Wald standard errors come from the same Hessian.
* **Profile-likelihood interval** for one coefficient: the other coefficients and ``sigma`` are refitted with the
  coefficient held fixed, and the signed root of the likelihood-ratio statistic is solved for the chi-square(1)
  quantile by a bracketed Newton step (its slope is the constrained score). A side whose profile stays below the
  quantile out to ``PROFILE_LIMIT`` logits has an infinite bound (separation: the data allow any value there), said
  in the note. The likelihood-ratio p refits with the coefficient at 0, so the interval excludes 0 exactly when
  ``p < 1 - level``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import special
from scipy import stats as _st

from . import stats
from .errors import ParameterError, check_positive_int, is_number

__all__ = ["CoefficientTest", "EFFECTS", "MixedLogitFit", "N_NODES", "PROFILE_LIMIT", "coefficient_test",
           "fit_mixed_logit", "mixed_loglik", "mixed_row"]

#: Gauss-Hermite nodes per cluster (the golden test checks the log-likelihood against adaptive quadrature by
#: scipy.integrate.quad to 1e-8 relative at this number).
N_NODES = 60
#: A profile bound further than this from the estimate (in logits: an odds ratio beyond e^40) is infinite.
PROFILE_LIMIT = 40.0
#: What :func:`mixed_row` reports: the coefficient exponentiated (a group indicator's odds ratio) or as it is (the
#: change in log-odds per unit of a covariate).
EFFECTS = ("odds_ratio", "log_odds_slope")

_MAX_STEP = 5.0  # logits: a Newton step longer than this is shortened (the first steps from a poor start)
_TOL = 1e-11  # half the Newton decrement at convergence (log-likelihood units)
_TIE = 1e-8  # log-likelihood gain below which sigma > 0 is no better than sigma = 0
_HUGE = 15.0  # |coefficient| in logits past which a fit is reported as drifting to infinity (separation)


@lru_cache(maxsize=8)
def _hermgauss(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.hermite.hermgauss(n_nodes)


@dataclass
class _Clusters:
    """The clusters used (positive totals), their design and the quadrature rule; modes kept as warm starts."""

    k: np.ndarray
    n: np.ndarray
    X: np.ndarray
    const: np.ndarray
    nodes: np.ndarray
    log_weights: np.ndarray
    mode: np.ndarray = field(init=False)

    def __post_init__(self):
        self.mode = np.zeros(len(self.k))

    @classmethod
    def build(cls, k, m, X, n_nodes):
        n = k + m
        t, w = _hermgauss(n_nodes)
        const = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(m + 1) - 0.5 * np.log(np.pi)
        return cls(k, n, X, const, t, np.log(w) + t ** 2)

    def _modes(self, eta, sigma):
        """Mode of g(z) = k(eta + sigma z) - n softplus(eta + sigma z) - z^2/2 per cluster: g' is decreasing and its
        root lies in [min(sigma k, -sigma m), max(...)]; Newton steps that leave the bracket bisect it."""
        k, n = self.k, self.n
        lo, hi = np.minimum(sigma * k, -sigma * (n - k)), np.maximum(sigma * k, -sigma * (n - k))
        z = np.clip(self.mode, lo, hi)
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
        self.mode = z
        return z

    def evaluate(self, theta, derivatives=True, penalty=False):
        """Log-likelihood at theta = (beta, sigma), and its gradient and Hessian (quadrature of the posterior
        moments of the complete-data score at the same nodes); with ``penalty``, plus log|sigma| and its
        derivatives (-inf at sigma = 0)."""
        beta, sigma = theta[:-1], theta[-1]
        eta = self.X @ beta
        zhat = self._modes(eta, sigma)
        p = special.expit(eta + sigma * zhat)
        scale = 1 / np.sqrt(1 + sigma ** 2 * self.n * p * (1 - p))
        z = zhat[:, None] + np.sqrt(2) * scale[:, None] * self.nodes[None, :]
        e = eta[:, None] + sigma * z
        tail = np.exp(-np.abs(e))  # one exponential for both log(1 + e^e) and expit(e)
        softplus = np.maximum(e, 0) + np.log1p(tail)
        terms = self.k[:, None] * e - self.n[:, None] * softplus - 0.5 * z * z + self.log_weights
        top = terms.max(axis=1, keepdims=True)
        mass = np.exp(terms - top)
        total = mass.sum(axis=1)
        loglik = float(np.sum(self.const + np.log(scale) + np.log(total) + top[:, 0]))
        if penalty:
            loglik = loglik + np.log(abs(sigma)) if sigma else -np.inf
        if not derivatives:
            return loglik, None, None
        post = mass / total[:, None]
        pz = np.where(e >= 0, 1.0, tail) / (1 + tail)
        r = self.k[:, None] - self.n[:, None] * pz
        pr = post * r
        r_mean, rz_mean = pr.sum(1), (pr * z).sum(1)
        curv = post * (r * r - self.n[:, None] * pz * (1 - pz))
        curv_z = curv * z
        c_bb = curv.sum(1) - r_mean ** 2
        c_bs = curv_z.sum(1) - r_mean * rz_mean
        c_ss = (curv_z * z).sum(1) - rz_mean ** 2
        q = self.X.shape[1]
        grad = np.empty(q + 1)
        grad[:q], grad[q] = self.X.T @ r_mean, rz_mean.sum()
        hess = np.empty((q + 1, q + 1))
        hess[:q, :q] = (self.X * c_bb[:, None]).T @ self.X
        hess[:q, q] = hess[q, :q] = self.X.T @ c_bs
        hess[q, q] = c_ss.sum()
        if penalty and sigma:
            grad[q] += 1 / sigma
            hess[q, q] -= 1 / sigma ** 2
        return loglik, grad, hess


def _ascent_step(grad, hess):
    """Newton step for a maximum on the eigenvalues of -hess made positive (|lambda|, at least 1e-12 of the largest),
    capped in length. A direction of separation keeps its tiny curvature, so its steps stay about one logit long
    (score and curvature fall together) until the gain is below the tolerance."""
    lam, vec = np.linalg.eigh(-hess)
    lam = np.maximum(np.abs(lam), 1e-12 * max(1.0, np.abs(lam).max()))
    step = vec @ ((vec.T @ grad) / lam)
    length = np.abs(step).max()
    return step * (_MAX_STEP / length) if length > _MAX_STEP else step


def _newton(data: _Clusters, theta, free, penalty=False, max_iter=200):
    """Maximise over the ``free`` entries of theta; the rest stay fixed. Returns (theta, objective, grad, hess,
    converged)."""
    theta = np.array(theta, dtype=float)
    ll, g, h = data.evaluate(theta, penalty=penalty)
    for _ in range(max_iter):
        gf, hf = g[free], h[np.ix_(free, free)]
        step = _ascent_step(gf, hf)
        gain = float(gf @ step)
        if gain / 2 < _TOL:
            return theta, ll, g, h, True
        t = 1.0
        while True:
            cand = theta.copy()
            cand[free] += t * step
            ll_c, g_c, h_c = data.evaluate(cand, penalty=penalty)
            if ll_c >= ll + 1e-4 * t * gain or t < 1e-10:
                break
            t /= 2
        if ll_c < ll:  # no ascent along the step at any length: at the optimum to the rounding of the likelihood
            return theta, ll, g, h, gain / 2 < 1e-6
        theta, ll, g, h = cand, ll_c, g_c, h_c
    return theta, ll, g, h, False


def _maximise(data: _Clusters, theta, free, penalty=False):
    """:func:`_newton`, with sigma free: a start at sigma = 0 stays there (its score is 0 by symmetry), which is the
    maximum only where the curvature in sigma is negative; otherwise the fit restarts from sigma = 0.1."""
    out = _newton(data, theta, free, penalty)
    if free[-1] and out[0][-1] == 0 and out[3][-1, -1] > 0:
        restart = out[0].copy()
        restart[-1] = 0.1
        out = _newton(data, restart, free, penalty)
    return out


@dataclass
class MixedLogitFit:
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
    _data: _Clusters = field(repr=False)
    _theta: np.ndarray = field(repr=False)


@dataclass
class CoefficientTest:
    """One coefficient: estimate and Wald SE (log-odds), the profile-likelihood interval at ``level`` (an infinite
    bound where the profile never reaches the chi-square quantile), the likelihood-ratio statistic and p for
    coefficient = 0, and a note saying what is unusual (empty when nothing is)."""

    name: str
    estimate: float
    se: float
    ci_low: float
    ci_high: float
    level: float
    lr_statistic: float
    p: float
    note: str


def _counts(values, name: str) -> np.ndarray:
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


def _design(design, names, n: int) -> tuple[np.ndarray, list[str]]:
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


def _check_rank(X: np.ndarray, names: list[str]) -> None:
    """Every column must add to the span of the ones before it (among the clusters used)."""
    rank = 0
    for j in range(X.shape[1]):
        r = np.linalg.matrix_rank(X[:, :j + 1])
        if r == rank:
            raise ParameterError(f"design: column {names[j]!r} is constant zero or a combination of the columns "
                                 f"before it among the clusters with words; drop it")
        rank = r


def fit_mixed_logit(successes, failures, design, *, names=None, sigma: float | None = None,
                    boundary_avoiding: bool = True, n_nodes: int = N_NODES) -> MixedLogitFit:
    """Fit ``successes | u ~ Binomial(successes + failures, expit(design @ beta + u))``, ``u ~ N(0, sigma^2)`` per
    cluster (row), by maximum marginal likelihood (adaptive Gauss-Hermite, ``n_nodes`` per cluster).

    ``design``: a DataFrame (its columns name the coefficients) or a 2-D array with ``names``; include the intercept
    column yourself. ``sigma``: None estimates it; a number fixes it (0 gives the binomial GLM).
    ``boundary_avoiding`` (default): maximise ``loglik + log(sigma)``, the gamma(2, 0) prior on sigma of Chung et
    al. (2013), so that sigma is never estimated at 0; plain maximum likelihood (False) puts sigma at 0 in a fair
    share of samples with few words per cluster, and then weights one talkative cluster as if its words were
    independent: the likelihood-ratio test's false-positive rate rises (tests/test_mixed.py measures both)."""
    k, m = _counts(successes, "successes"), _counts(failures, "failures")
    if len(k) != len(m):
        raise ParameterError(f"successes and failures must have one value per cluster each, got {len(k)} and "
                             f"{len(m)}")
    X, names = _design(design, names, len(k))
    n_nodes = check_positive_int(n_nodes, "n_nodes")
    if sigma is not None and not (is_number(sigma) and np.isfinite(sigma) and sigma >= 0):
        raise ParameterError(f"sigma must be None (estimated) or a number >= 0, got {sigma!r}")
    if not isinstance(boundary_avoiding, bool):
        raise ParameterError(f"boundary_avoiding must be True or False, got {boundary_avoiding!r}")
    used = (k + m) > 0
    if used.sum() <= X.shape[1]:
        raise ParameterError(f"successes/failures: {int(used.sum())} clusters have any count, need more than the "
                             f"{X.shape[1]} coefficients")
    _check_rank(X[used], names)
    data = _Clusters.build(k[used], m[used], X[used], n_nodes)
    q = X.shape[1]
    beta_only, both = np.r_[np.ones(q, bool), False], np.ones(q + 1, bool)
    penalty = sigma is None and boundary_avoiding
    glm = _newton(data, np.r_[np.zeros(q), sigma or 0.0], beta_only)
    if sigma is not None:
        best, free = glm, beta_only
    else:
        # from sigma = 1 and, without the penalty, from the boundary (kept there only where it is a maximum in
        # sigma): the better is kept
        fits = [_newton(data, np.r_[glm[0][:-1], 1.0], both, penalty)]
        fits += [] if penalty else [_maximise(data, glm[0], both)]
        best, free = max(fits, key=lambda f: f[1]), both
        if not penalty and best[1] <= glm[1] + _TIE:
            best, free = glm, beta_only
    theta, objective, _, h, ok = best
    theta[-1] = abs(theta[-1])
    loglik = objective - np.log(theta[-1]) if penalty else objective
    se = _wald_se(h, free, q)
    messages = [] if ok else ["Newton's method did not converge"]
    drift = [nm for nm, b in zip(names, theta[:q]) if abs(b) > _HUGE]
    if drift:
        messages.append(f"{', '.join(drift)}: beyond {_HUGE:g} logits (separation: the likelihood keeps rising as "
                        f"it grows; the estimate and its Wald SE are not finite in effect)")
    if not np.isfinite(se).all():
        messages.append("the observed information is singular: Wald SEs are NaN")
    return MixedLogitFit(names=names, coef=pd.Series(theta[:q], index=names), se=pd.Series(se, index=names),
                         sigma=float(theta[-1]), loglik=float(loglik), objective=float(objective),
                         boundary_avoiding=penalty, converged=ok, message="; ".join(messages),
                         n_clusters=int(used.sum()), n_clusters_given=len(k), sigma_fixed=sigma is not None,
                         n_nodes=n_nodes, _data=data, _theta=theta)


def _wald_se(hess, free, q) -> np.ndarray:
    """SEs of the coefficients from the inverse of the observed information over the free parameters."""
    info = -hess[np.ix_(free, free)]
    try:
        np.linalg.cholesky(info)
    except np.linalg.LinAlgError:
        return np.full(q, np.nan)
    return np.sqrt(np.diag(np.linalg.inv(info))[:q])


def mixed_loglik(successes, failures, design, coef, sigma: float, *, n_nodes: int = N_NODES) -> float:
    """The marginal log-likelihood that :func:`fit_mixed_logit` maximises, at coefficients ``coef`` (in the design's
    column order) and random-intercept SD ``sigma`` (clusters without counts add 0)."""
    k, m = _counts(successes, "successes"), _counts(failures, "failures")
    X, _ = _design(design, None, len(k))
    coef = np.asarray(coef, dtype=float)
    if coef.shape != (X.shape[1],):
        raise ParameterError(f"coef must hold {X.shape[1]} values (one per design column), got shape {coef.shape}")
    used = (k + m) > 0
    data = _Clusters.build(k[used], m[used], X[used], check_positive_int(n_nodes, "n_nodes"))
    if not (is_number(sigma) and np.isfinite(sigma)):
        raise ParameterError(f"sigma must be a finite number, got {sigma!r}")
    return data.evaluate(np.r_[coef, float(sigma)], derivatives=False)[0]


class _Profile:
    """The profile of the fit's objective in coefficient j: the others (and sigma, unless fixed) refitted with
    beta_j = b, warm-started from the nearest b already fitted."""

    def __init__(self, fit: MixedLogitFit, j: int):
        self.fit, self.j = fit, j
        self.free = np.r_[np.ones(len(fit.names), bool), not fit.sigma_fixed]
        self.free[j] = False
        self.done: dict[float, np.ndarray] = {fit.coef.iloc[j]: fit._theta}

    def __call__(self, b: float) -> tuple[float, float, bool]:
        """(LR statistic 2(l_hat - l_p(b)), the constrained score d l_p / db, converged)."""
        start = self.done[min(self.done, key=lambda c: abs(c - b))].copy()
        start[self.j] = b
        theta, ll, g, _, ok = _maximise(self.fit._data, start, self.free, self.fit.boundary_avoiding)
        self.done[b] = theta
        return 2 * (self.fit.objective - ll), float(g[self.j]), ok


def _bound(profile: _Profile, estimate: float, se: float, side: int, target: float) -> tuple[float, bool]:
    """The b on ``side`` (+1 above, -1 below) where the signed root sqrt(LR) reaches ``target``; inf where it never
    does within PROFILE_LIMIT. Newton steps in the root (nearly linear in b) on the distance d from the estimate,
    bisecting inside a known bracket; without one, d at most doubles (plus one) per step."""
    inner, outer, ok_all = 0.0, None, True
    d = min(se * target if np.isfinite(se) and se > 0 else 1.0, PROFILE_LIMIT)
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
            if d >= PROFILE_LIMIT:
                return side * np.inf, ok_all
            far = min(2 * d + 1.0, PROFILE_LIMIT)
            d = new if np.isfinite(new) and d < new <= far else far
        else:
            d = new if np.isfinite(new) and inner < new < outer else 0.5 * (inner + outer)
            if outer - inner < 1e-10 * (1 + abs(estimate) + d):
                break
    else:
        ok_all = False
    return estimate + side * d, ok_all


def coefficient_test(fit: MixedLogitFit, name: str, *, level: float = 0.95) -> CoefficientTest:
    """Profile-likelihood interval at ``level`` and likelihood-ratio test of ``name`` = 0 (the model refitted
    without it, sigma refitted too unless the fit fixed it)."""
    if name not in fit.names:
        raise ParameterError(f"name must be one of the fit's coefficients {fit.names}, got {name!r}")
    if not (isinstance(level, float) and 0 < level < 1):
        raise ParameterError(f"level must be a float between 0 and 1, got {level!r}")
    j = fit.names.index(name)
    estimate, se = float(fit.coef.iloc[j]), float(fit.se.iloc[j])
    profile = _Profile(fit, j)
    target = np.sqrt(_st.chi2.ppf(level, 1))
    low, ok_low = _bound(profile, estimate, se, -1, target)
    high, ok_high = _bound(profile, estimate, se, +1, target)
    lr, _, ok_zero = profile(0.0)
    lr = max(lr, 0.0)
    notes = [] if fit.converged else [f"the fit did not converge ({fit.message})"]
    notes += [] if ok_low and ok_high and ok_zero else ["a refit of the profile did not converge"]
    for bound, word in ((low, "lower"), (high, "upper")):
        if not np.isfinite(bound):
            notes.append(f"the {word} bound is infinite: the profile likelihood never falls by the chi-square "
                         f"quantile on that side (within {PROFILE_LIMIT:g} logits; e.g. separation)")
    return CoefficientTest(name=name, estimate=estimate, se=se, ci_low=float(low), ci_high=float(high), level=level,
                           lr_statistic=float(lr), p=float(_st.chi2.sf(lr, 1)), note="; ".join(notes))


def mixed_row(fit: MixedLogitFit, name: str, *, effect: str = "odds_ratio", level: float = 0.95,
              test: str = "mixed_logit_lr", group_a: str | None = None, group_b: str = "") -> dict:
    """A row of the project's statistics tables (:data:`bias_utils.stats.STAT_COLUMNS`) for coefficient ``name``:
    the likelihood-ratio statistic (df 1) and p, the effect as an odds ratio (``exp`` of the coefficient and of its
    profile bounds) or as the log-odds slope, ``n`` the clusters used; beside them ``n_clusters``,
    ``n_clusters_given``, ``sigma`` and ``note``. ``group_a`` defaults to the coefficient's name."""
    if effect not in EFFECTS:
        raise ParameterError(f"effect must be one of {EFFECTS}, got {effect!r}")
    t = coefficient_test(fit, name, level=level)
    scale = np.exp if effect == "odds_ratio" else float
    notes = [s for s in (fit.message, t.note) if s]
    row = dict.fromkeys(stats.STAT_COLUMNS, np.nan)
    row.update(test=test, group_a=name if group_a is None else group_a, group_b=group_b, statistic=t.lr_statistic,
               df=1.0, p=t.p, adj_method="", effect=effect, effect_size=float(scale(t.estimate)),
               ci_low=float(scale(t.ci_low)), ci_high=float(scale(t.ci_high)), n=fit.n_clusters,
               n_clusters=fit.n_clusters, n_clusters_given=fit.n_clusters_given, sigma=fit.sigma,
               note="; ".join(dict.fromkeys(notes)))
    return row
