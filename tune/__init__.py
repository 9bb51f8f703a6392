"""kiln.tune: find the fastest right way to compile one model for one target on one machine.

Import rule: kiln.compiler, kiln.measure, kiln.runtime, kiln.passes and kiln.errors. `space` is
what may change (data per target), `search` compiles and times candidates, `cache` stores winners
for `kiln compile --tuned`; `measure` is the half that runs where the artifacts run, and imports
nothing of the compiler. `bench` is compile, load, bench for `kiln bench` and the benchmark suite:
the package where compiling and kiln.measure meet.
"""
