//! Behaviour tests of the simulator and the `sim` command, one file per
//! behaviour.

// Tests may print their diagnostics with the std macros (sim/clippy.toml
// keeps them out of the command itself).
#![allow(clippy::disallowed_macros)]

mod calibration;
mod catalogue;
mod check_branches;
mod check_calls;
mod check_catalogue;
mod check_cli;
mod check_connections;
mod check_demos;
mod check_exchange;
mod check_joint;
mod check_lanes;
mod check_soundness;
mod check_stateful;
mod closed_form;
mod closed_stdout;
mod compare;
mod deadlock;
mod determinism;
mod ethernet_transport;
mod extrapolation;
mod failure_exits;
mod faults;
mod flow_successors;
mod fold;
mod fold_nccl;
mod golden;
mod input_fuzz;
mod interrupts;
mod link_faults;
mod links_timeline;
mod loss_scenarios;
mod network_models;
mod output_files;
mod pat_sendrecv;
mod presets;
mod real_bench;
mod real_catalogue;
mod real_flood;
mod real_launch;
mod real_processes;
mod real_run;
mod real_stopped;
mod real_support;
mod registry_interface;
mod reliability;
mod ring_allreduce_reference;
mod scaling_story;
mod scenario_errors;
mod special_inputs;
mod support;
mod sweep;
mod topology_errors;
mod topology_outputs;
mod topology_scenarios;
mod tuner_cli;
mod up_down_routing;
