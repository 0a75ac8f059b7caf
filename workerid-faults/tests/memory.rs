//! The in-process memory store: clients on threads of one process, each
//! with a runtime of its own, crashed (the runtime dropped with the
//! worker's keeper in it, nothing released) and their wall clocks stepped.

mod support;

use std::time::Duration;

use workerid_faults::inprocess;
use workerid_faults::nemesis::Fault;

#[test]
fn memory_keeps_every_rule_under_crashes_and_clock_steps() {
    let faults = [Fault::KillClient, Fault::StepClock];
    let mut config = support::config(Duration::from_secs(20), &faults);
    config.fault_every = Duration::from_millis(1_500);
    let outcome = inprocess::run(&config).unwrap();
    support::assert_safe(&outcome, &faults);
}
