//! Behaviour tests of the simulator and the `sim` command, one file per
//! behaviour.

mod catalogue;
mod closed_form;
mod deadlock;
mod determinism;
mod failure_exits;
mod faults;
mod golden;
mod link_faults;
mod links_timeline;
mod loss_scenarios;
mod network_models;
mod presets;
mod reliability;
mod ring_allreduce_reference;
mod scaling_story;
mod scenario_errors;
mod support;
mod sweep;
mod topology_scenarios;
mod tuner_cli;
mod up_down_routing;
