"""reward-kit's code-executing reward functions, with every program in an Airlock sandbox.

One import line changes, the module names are reward-kit's::

    # from reward_kit.rewards.code_execution import local_code_execution_reward
    from engine.compat.reward_kit.code_execution import local_code_execution_reward

Same signatures, scores, metric names and reasons as reward-kit 0.4.1, and reward-kit's own
result types when it is installed. Where reward-kit touches the host (its programs inherit the
caller's stdin, working directory and environment, and a timed-out program is left running),
the sandbox does not; docs/reward-kit-compat.md lists each difference.
"""
