"""Capacity that counts finishing: the CPU a job needs end to end sizes pods and browsers, and a
simulated farm that signs every job keeps the queue waits of one that only prints."""

from __future__ import annotations

import dataclasses
import json
import random
import statistics

import pytest

from reportfarm import capacity, policy
from reportfarm.simulate import farm, finishing, ours, running, traces, workload

SPEC = policy.PoolSpec(
    min_replicas=0, max_replicas=50, max_browsers_per_pod=8, pod_cpu=2.0, browser_cpu=0.5
)


def _observe(*, depth: int, busy: int, job_cpu_s: float | None) -> policy.Observation:
    return policy.Observation(
        now=0.0,
        queue_depth=depth,
        ready_replicas=2,
        browsers_per_pod=4,
        busy_browsers=busy,
        mean_render_s=0.5,
        job_cpu_s=job_cpu_s,
    )


@pytest.mark.parametrize(
    ("job_cpu_s", "fit"),
    [
        pytest.param(None, 4, id="unknown: browsers alone"),
        pytest.param(0.2, 4, id="a print's CPU: no change"),
        pytest.param(0.5, 2, id="1 core a browser"),
        pytest.param(0.8, 1, id="more than a pod's share"),
    ],
)
def test_a_browsers_cpu_is_what_its_jobs_need_end_to_end(job_cpu_s: float | None, fit: int) -> None:
    sized = capacity.sized(SPEC, _observe(depth=0, busy=0, job_cpu_s=job_cpu_s), render_s=0.5)
    assert sized.browsers_that_fit == fit
    assert sized.browser_cpu >= SPEC.browser_cpu


def test_the_policy_gives_a_signing_farm_more_pods_of_fewer_browsers() -> None:
    prints = policy.decide(_observe(depth=40, busy=8, job_cpu_s=0.2), SPEC)
    signs = policy.decide(_observe(depth=40, busy=8, job_cpu_s=0.5), SPEC)
    assert (signs.browsers_per_pod, prints.browsers_per_pod) == (2, 4)
    assert signs.replicas > prints.replicas
    assert capacity.job_cpu_s(print_cpu_s=3.0, finish_cpu_s=1.0, jobs=10) == 0.4
    assert capacity.job_cpu_s(print_cpu_s=3.0, finish_cpu_s=1.0, jobs=0) is None


def test_a_signing_farm_holds_the_queue_waits_of_a_printing_one() -> None:
    results = finishing.compare(("steady",))
    counted, prints = results["steady/cpu counted"], results["steady/prints only"]
    blind = results["steady/browsers only"]
    for result in results.values():
        assert result["jobs_completed"] == result["jobs_total"]
    assert counted["p95_wait_s"] <= counted["target_wait_s"]
    assert counted["p95_wait_s"] <= blind["p95_wait_s"]
    assert counted["pod_seconds"] > prints["pod_seconds"]  # the signatures' CPU is paid for


NODE_SPEC = finishing.node_spec(jobs_per_browser=None)
"""The real node's signing pool: 1-3 pods of 1 CPU, browsers of 0.25 CPU, a 10 s target. The
depth floor is off: these tests check what the finishing CPU changes in the sizing, which the
floor (20 browsers for 40 jobs) would hide."""


def test_a_light_print_that_signs_is_sized_at_the_pods_cpu_rate() -> None:
    """As on the real node: the invoice printed in 35 ms and finished with 0.35 s of CPU. A busy
    browser's jobs need 10 cores, more than a pod of 1 has: a pod holds one browser and finishes a
    job every 0.35 s, not every 35 ms. A backlog of 40 is then 14 s of one pod's work, over the
    10 s target: a pod more than the same pods need when a job's CPU just fits its browser."""
    spec = NODE_SPEC
    seen = policy.Observation(
        now=0.0,
        queue_depth=40,
        ready_replicas=1,
        browsers_per_pod=4,
        busy_browsers=1,
        mean_render_s=0.035,
        finish_cpu_s=0.34,
    )
    sized = capacity.sized(spec, seen, render_s=0.035)
    assert (sized.browser_cpu, sized.browsers_that_fit) == (1.0, 1)  # at most the pod's CPU
    assert capacity.service_s(spec, seen, render_s=0.035) == pytest.approx(0.25 * 0.035 + 0.34)
    decision = policy.decide(seen, spec)
    assert decision.browsers_per_pod == 1, decision.message  # one browser takes the whole pod
    # The same pods (one browser of a whole CPU) when a job's CPU just fits: 35 ms a job.
    fits = dataclasses.replace(seen, finish_cpu_s=0.035 - 0.25 * 0.035)
    assert capacity.sized(spec, fits, render_s=0.035).browser_cpu == pytest.approx(1.0)
    assert capacity.service_s(spec, fits, render_s=0.035) == pytest.approx(0.035)
    light = policy.decide(fits, spec)
    assert light.browsers_per_pod == 1, light.message
    assert decision.replicas > light.replicas, (decision.message, light.message)
    by_browsers = policy.decide(dataclasses.replace(seen, finish_cpu_s=None), spec)
    assert by_browsers.replicas == 1, by_browsers.message  # 40 x 35 ms: one pod looks enough
    plain = dataclasses.replace(seen, finish_cpu_s=0.0)
    assert capacity.sized(spec, plain, render_s=0.035).browser_cpu == spec.browser_cpu


def _light_signing_farm(**timings: float) -> finishing.FinishingFarm:
    """A pod of 1 CPU whose jobs print in 35 ms and sign with 0.35 s of CPU, as on the node."""
    return finishing.FinishingFarm(
        cpu=finishing.JobCpu(finish_cpu_s=0.35, print_cpu=0.25),
        timings=farm.Timings(pod_start_s=0.0, resize_failure=0.0, **timings),
        browsers_per_pod=2,
        rng=random.Random(0),
        pod_cpu_request=1.0,
    )


@pytest.mark.parametrize(
    ("finishing", "signature", "expected"),
    [
        pytest.param(2, 0.3, 0.3, id="in finishing, none ended: the start-up signature"),
        pytest.param(0, 0.3, None, id="none in finishing: it may not sign"),
        pytest.param(2, None, None, id="no signature measured"),
        pytest.param(2, 0.0, None, id="a renderer that says 0: unknown"),
    ],
)
def test_before_any_job_ended_the_start_up_signature_stands_in(
    finishing: int, signature: float | None, expected: float | None
) -> None:
    figure = capacity.finish_cpu_s(
        recent=(0.0, 0), lifetime=(0.0, 0), finishing=finishing, signature_cpu_s=signature
    )
    assert figure == expected
    ended = capacity.finish_cpu_s(
        recent=(0.0, 0), lifetime=(0.5, 1), finishing=finishing, signature_cpu_s=signature
    )
    assert ended == 0.5  # a job ended: its figure, whatever the start-up one said


def test_the_simulator_reads_the_start_up_signature_as_the_operator_does() -> None:
    cluster = finishing.FinishingFarm(
        cpu=finishing.JobCpu(finish_cpu_s=0.35, print_cpu=0.25, signature_cpu_s=0.3),
        timings=farm.Timings(pod_start_s=0.0, resize_failure=0.0),
        browsers_per_pod=2,
        rng=random.Random(0),
        pod_cpu_request=1.0,
    )
    cluster.add_pods(1, now=0.0)
    assert cluster.read_finish_cpu(0.1) is None  # nothing in finishing
    cluster.step(0.0, arrivals=[workload.Job(arrival=0.0, render_s=0.035) for _ in range(2)])
    assert cluster.read_finish_cpu(0.2) == pytest.approx(0.3)  # signing, none ended
    assert cluster.read_finish_cpu(0.8) == pytest.approx(0.35)  # the first one's, measured


def test_the_simulator_reads_a_pod_as_the_operator_does() -> None:
    """A job in a finishing process keeps its pod busy (up to the pool's size) and its message
    in the queue's count; its finishing CPU is unknown until a job's finishing ended, then per
    job ended; a draining pod stays until its finishing is over."""
    cluster = _light_signing_farm()
    cluster.add_pods(1, now=0.0)
    jobs = [workload.Job(arrival=0.0, render_s=0.035) for _ in range(2)]
    cluster.step(0.0, arrivals=jobs)
    # Both printed in 35 ms; the pod's one finishing process signs the first job, and the second
    # waits for it in its browser (the worker's take-ahead).
    (pod,) = cluster.pods
    assert (pod.busy(0.2), cluster.in_finishing(pod, 0.2)) == (1, 1)
    assert cluster.busy_by_pod(0.2) == {pod.name: 2} == {pod.name: cluster.busy_seen(0.2)}
    assert cluster.approximate_count(0.2) == 2
    assert cluster.read_finish_cpu(0.2) is None  # no job's finishing has ended yet
    assert cluster.read_finish_cpu(0.8) == pytest.approx(0.35)  # the first one's, lifetime
    cluster.drain([pod.name], now=0.8)
    assert cluster.pods == [pod]  # its second job signs until 1.4 s
    cluster.step(1.0, arrivals=[])
    assert cluster.pods == []


def test_a_signing_farm_of_light_prints_holds_the_pods_its_finishing_keeps_busy() -> None:
    """5 invoices a second on pods of 1 CPU: a print of 35 ms, then 0.35 s of signing. Read by
    their printing browsers alone, the pods look nearly idle (0.2 browsers busy), the steady need
    is sized from the prints, and the stream is served by backlogs that build and drain: after the
    wake, p95 0.35 s on 3.5 pods (the simulator before it modelled the operator's fix: 0.55 s on
    3.1). With the jobs in finishing counted busy: 0.08 s on 3.7 pods, and since no pod is started
    for a backlog the ready pods clear before it is up (``policy._cleared``), 0.53 s on 3.9 pods
    at 1.7 % fewer pod-seconds (seeds 1 and 2: 0.19 and 0.28 s, as before), a twentieth of the
    10 s target."""
    spec = policy.PoolSpec(
        min_replicas=1,
        max_replicas=10,
        max_browsers_per_pod=4,
        pod_cpu=1.0,
        browser_cpu=0.25,
        target_wait_s=10,
    )
    rng = random.Random(0)
    trace = traces.Trace(
        name="invoices", arrivals=tuple(traces.poisson(rng, 5.0) for _ in range(600))
    )
    scenario = running.Scenario(
        spec=spec,
        finishing=finishing.JobCpu(finish_cpu_s=0.35, print_cpu=0.25),
        render=workload.RenderTimes(median_s=0.035, sigma=0.2),
        max_tail_s=60,
    )
    run = running.run(trace, ours.PolicyController(spec=spec), scenario=scenario)
    waits = sorted(job.start - job.arrival for job in run.jobs if job.start and job.arrival >= 120)
    assert waits[int(0.95 * len(waits))] < 0.1 * spec.target_wait_s
    assert statistics.mean(run.replicas[120:600]) > 3.6


def _asleep(finish_cpu_s: float | None) -> policy.State:
    """A pool scaled to zero after a burst of invoices: 35 ms prints, and the finishing CPU per
    job it read then (None: not remembered)."""
    return policy.State(
        replicas=0,
        browsers_per_pod=1,
        render_s=0.035,
        finish_cpu_s=finish_cpu_s,
        last_work_at=0.0,
        decided_at=995.0,
        depth=0,
        reason="ScaleToZero",
    )


def test_a_signing_farm_that_wakes_sizes_for_its_signatures_from_the_first_decision() -> None:
    """40 invoices wake the pool: no pod runs, no job's finishing has ended, so nothing reads
    the finishing CPU yet. The memory of the last burst (0.34 s a job) sizes the wake for it:
    3 pods of 1 browser, where by the prints alone (40 x 35 ms) one pod of 4 looks enough. The
    first reading then replaces it, whatever it says (0 once the jobs stop signing)."""
    woken = policy.Observation(
        now=1000.0, queue_depth=40, ready_replicas=0, browsers_per_pod=4, busy_browsers=0
    )
    blind = policy.decide(woken, NODE_SPEC, _asleep(None))
    known = policy.decide(woken, NODE_SPEC, _asleep(0.34))
    assert (blind.replicas, blind.browsers_per_pod) == (1, 4), blind.message
    assert (known.replicas, known.browsers_per_pod) == (3, 1), known.message
    assert known.reason is policy.Reason.WAKE_FROM_ZERO
    assert known.state.finish_cpu_s == 0.34  # kept until a reading replaces it
    plain = dataclasses.replace(woken, now=1005.0, ready_replicas=3, finish_cpu_s=0.0)
    assert policy.decide(plain, NODE_SPEC, known.state).state.finish_cpu_s == 0.0
    unread = dataclasses.replace(plain, finish_cpu_s=None, job_cpu_s=0.3)  # measured otherwise
    assert policy.decide(unread, NODE_SPEC, known.state).state.finish_cpu_s == 0.34


def test_the_known_finishing_cpu_round_trips_through_the_status() -> None:
    memory = _asleep(0.34)
    plain = json.loads(json.dumps(memory.to_dict()))  # as stored in the ReportPool status
    assert plain["knownFinishCpuSeconds"] == 0.34
    assert policy.State.from_dict(plain) == memory
    assert policy.State.from_dict({"renderSeconds": 0.035}).finish_cpu_s is None  # older status


def test_the_simulated_node_pool_wakes_for_its_signatures_the_second_time() -> None:
    """The node's pool, woken twice by a burst of invoices: the first wake knows nothing of the
    signatures (4 browsers a pod until the first job's finishing ends), the second remembers
    them (3 pods of 1 browser at once) and waits less than the first."""
    woken = finishing.node_wakes()
    first, second = woken["node-wakes/first burst"], woken["node-wakes/second burst"]
    assert (first["woken_to"], second["woken_to"]) == ("3x4", "3x1")
    assert second["p95_wait_s"] < first["p95_wait_s"]


def test_a_new_signing_pool_sizes_for_its_expected_signatures_until_a_reading() -> None:
    """A pool with a signing key has never read a finishing CPU: its spec's expected one (the
    operator's default for a signing pool) sizes its first decision as a remembered one would
    (3 pods of 1 browser for 40 invoices, where the prints alone make 1 pod of 4), without being
    stored as known; any reading replaces it, and a remembered figure wins over it."""
    expecting = dataclasses.replace(NODE_SPEC, expected_finish_cpu_s=capacity.SIGNING_FINISH_CPU_S)
    new = policy.Observation(
        now=0.0, queue_depth=40, ready_replicas=1, browsers_per_pod=4, busy_browsers=0
    )
    blind = policy.decide(new, NODE_SPEC)
    first = policy.decide(new, expecting)
    assert (blind.replicas, blind.browsers_per_pod) == (1, 4), blind.message
    assert (first.replicas, first.browsers_per_pod) == (3, 1), first.message
    assert first.state.finish_cpu_s is None  # expected, not measured: nothing remembered
    assert policy.remembered(new, first.state, expecting).finish_cpu_s == 0.35
    plain = dataclasses.replace(new, now=5.0, ready_replicas=3, finish_cpu_s=0.0)
    read = policy.decide(plain, expecting, first.state)
    assert read.browsers_per_pod == 4 and read.state.finish_cpu_s == 0.0, read.message
    later = dataclasses.replace(new, now=10.0)  # the pods gone: the remembered 0 wins
    assert policy.decide(later, expecting, read.state).browsers_per_pod == 4
    # A new pod's pool before any decision: what the expected CPU leaves room for.
    assert capacity.expected(expecting).browsers_that_fit == 1
    assert capacity.expected(NODE_SPEC) is NODE_SPEC
    nothing = dataclasses.replace(NODE_SPEC, expected_finish_cpu_s=0.0)
    assert capacity.expected(nothing).browsers_that_fit == 4
    with pytest.raises(ValueError, match="expected_finish_cpu_s"):
        dataclasses.replace(NODE_SPEC, expected_finish_cpu_s=-0.1)


def _idle_before(burst: policy.Observation, spec: policy.PoolSpec) -> policy.State:
    """The policy's state after three ticks of the burst's pool idle, as before the node's burst
    (nothing queued, busy or rendered)."""
    state = None
    for now in (burst.now - 15, burst.now - 10, burst.now - 5):
        idle = dataclasses.replace(
            burst, now=now, queue_depth=0, busy_browsers=0, completed=0, mean_render_s=None
        )
        state = policy.decide(idle, spec, state).state
    assert state is not None
    return state


def test_the_pods_measured_signature_stands_in_for_the_expected_finishing_cpu() -> None:
    """The real node's burst, first decision: 20 invoices queued on the one ready pod (1 CPU, 1
    browser), no job's finishing ended yet. Sized with the signing pool's expected 0.35 s a job
    it starts 2 more pods (as the node did, up after the burst was gone); with the 0.05 s the
    pod's start-up signature measured it keeps the one. The measure stands in only where the
    spec expects finishing (a pool that may not sign is not sized by a key it holds), is not
    remembered as a job's figure, and a job's figure remembered from before wins over it."""
    expecting = finishing.node_spec(
        min_replicas=1, expected_finish_cpu_s=capacity.SIGNING_FINISH_CPU_S
    )
    burst = policy.Observation(
        now=65.0,
        queue_depth=20,
        ready_replicas=1,
        browsers_per_pod=1,
        busy_browsers=1,
        mean_render_s=0.038,
        completed=0,
    )
    state = _idle_before(burst, expecting)
    prior = policy.decide(burst, expecting, state)
    measured = policy.decide(dataclasses.replace(burst, signature_cpu_s=0.05), expecting, state)
    assert prior.replicas == 3, prior.message
    assert measured.replicas == 1, measured.message
    assert measured.state.finish_cpu_s is None
    signed = dataclasses.replace(burst, signature_cpu_s=0.05)
    assert policy.remembered(signed, state, expecting).finish_cpu_s == 0.05
    for spec in (NODE_SPEC, dataclasses.replace(NODE_SPEC, expected_finish_cpu_s=0.0)):
        assert not policy.remembered(signed, state, spec).finish_cpu_s
    known = dataclasses.replace(state, finish_cpu_s=0.4)
    assert policy.remembered(signed, known, expecting).finish_cpu_s == 0.4


def test_the_simulated_node_pool_expecting_its_signatures_wakes_right_the_first_time() -> None:
    """The node's pool given its expected finishing CPU: the first wake is sized as the second
    (3 pods of 1 browser) and waits no longer than the remembered one, for fewer pod-seconds
    than the same pool sized by its prints until a job's finishing ended."""
    blind = finishing.node_wakes()
    expecting = finishing.node_wakes(expected_finish_cpu_s=capacity.SIGNING_FINISH_CPU_S)
    first = expecting["node-wakes/first burst"]
    assert first["woken_to"] == "3x1"
    assert first["p95_wait_s"] < blind["node-wakes/first burst"]["p95_wait_s"]
    assert first["p95_wait_s"] <= expecting["node-wakes/second burst"]["p95_wait_s"] * 1.1
    assert expecting["node-wakes/pod_seconds"] < blind["node-wakes/pod_seconds"]


@pytest.mark.parametrize(("burst", "rate", "seconds"), finishing.NODE_SHAPES)
def test_the_simulated_node_farm_holds_its_target_on_the_node_tests_shapes(
    burst: int, rate: float, seconds: int
) -> None:
    """The real node's signing farm test in the simulator (one pod ready, then a burst and a
    stream of signed invoices, 0.07 s of finishing each as the node's pods measure it, 0.05 s
    their start-up signature): the queue wait holds the 10 s target at p95, on the mean of five
    seeds, with nine in ten jobs or more within it in every seed. With the 0.35 s a job (and
    0.31 s a start-up signature) it took before the stamp's face was parsed once, the same farm
    waits longer on more pods (the node read 12-26 s at p95 then)."""
    runs = [
        finishing.node_farm(seed=seed, burst=burst, rate_per_s=rate, seconds=seconds)
        for seed in range(5)
    ]
    target = runs[0]["target_wait_s"]
    assert statistics.fmean(run["p95_wait_s"] for run in runs) <= target, runs
    assert min(run["within_target"] for run in runs) >= 0.9, runs
    before = finishing.node_farm(
        burst=burst, rate_per_s=rate, seconds=seconds, finish_cpu_s=0.35, signature_cpu_s=0.31
    )
    assert before["p95_wait_s"] > runs[0]["p95_wait_s"], (before, runs[0])
    assert before["pod_seconds"] > runs[0]["pod_seconds"], (before, runs[0])


def test_no_pod_is_started_for_a_burst_the_ready_pod_clears_before_it_could_be_up() -> None:
    """The node's first tick of a 20-invoice burst (tests/node: one pod of 1 CPU, 35 ms prints,
    0.07 s of finishing): 16 queued, 4 busy. The depth's floor asks 8 browsers and a batch
    landing reads as a stream, but the ready pod clears all of it and the stream it could be in
    long before a pod started now is up: no pod is started (two were, one for the floor and one
    for the surge, each a rounding up of a fraction of a browser). The same depth of 0.5 s renders
    on the same pod is ~10 s of its work with more arriving: pods are started."""
    seen = policy.Observation(
        now=65.0,
        queue_depth=16,
        ready_replicas=1,
        browsers_per_pod=4,
        busy_browsers=4,
        mean_render_s=0.038,
        completed=8,
        finish_cpu_s=0.07,
    )
    spec = finishing.node_spec(min_replicas=1)
    state = _idle_before(seen, spec)  # a pod of 4 browsers, idle
    cleared = policy.decide(seen, spec, state)
    assert cleared.replicas == 1, cleared.message
    heavy = dataclasses.replace(seen, queue_depth=400, mean_render_s=0.5, finish_cpu_s=None)
    started = policy.decide(heavy, spec, state)
    assert started.replicas > 1, started.message
    # In the simulator, the node test's 20- and 30-job shapes run on the one pod, as fast.
    for burst in (20, 30):
        for seed in range(3):
            run = finishing.node_farm(seed=seed, burst=burst)
            assert run["peak_pods"] == 1 and run["within_target"] == 1.0, run
