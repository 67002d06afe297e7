"""Evidence: the one home of interval statistics, seed-level tests and verdicts (pure numpy).

Modules, one job each (import them directly; this package re-exports nothing):
- distributions: Student t, normal and noncentral t distribution functions (no scipy at run time).
- intervals:     `Interval`; Student t, paired t and Welch t intervals; their text form.
- bootstrap:     the percentile bootstrap of a mean over problems (`ict eval`, the grid's cells).
- hierarchical:  the hierarchical bootstrap over seeds and problems, stratified by warm start
                 when there are several (the report's description).
- seed_tests:    seed-level tests of a difference: paired t (blocked by warm start: Welch-
                 Satterthwaite df), exact sign flip, Welch t; warm starts as the unit.
- multiplicity:  Holm's step-down adjustment.
- equivalence:   TOST against a declared margin.
- power:         power and minimum detectable effect of a t test (noncentral t); of a design
                 with warm starts as the unit (n_inits x n_seeds).
- endpoints:     declared primary comparisons, alpha and the equivalence margin.
- verdict:       the verdict rule: higher / lower / equivalent / inconclusive.
- health:        entropy collapse / explosion judged over windows (first vs last steps).
"""
