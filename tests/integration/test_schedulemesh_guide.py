"""ScheduleMesh's agent-configuration guide, run as written there against planact's schedulemesh.

The guide's code is copied call for call. What this machine cannot do is changed and said: the Ray
node declares the guide's GPUs, FPGAs and TPU as logical resources (no hardware needed to schedule),
the pools the guide assumes exist are created first, and `runtime_env["pip"]` (installing torch 2.0 and
transformers 4.30 from PyPI) is left out of the runtime environments; their env_vars stay.
"""

from __future__ import annotations

import os

import pytest
import ray

from schedulemesh import Scheduler
from schedulemesh.core.agent_actor import AgentActor

from .conftest import LOOPBACK_RAY
from .sm_agents import CustomAgent, CustomModelAgent, ModelServerAgent


@pytest.fixture(scope="module")
def scheduler():
    os.environ.update(LOOPBACK_RAY)
    ray.init(
        address="local",
        num_cpus=24,
        num_gpus=4,
        resources={"fpga": 4, "special_hardware": 2, "tpu": 1},
        _memory=64 * 2**30,
        include_dashboard=False,
        namespace="sm-guide",
    )
    s = Scheduler(namespace="sm-guide", check_interval_s=0.5, heartbeat_interval_s=0.5)
    # Pools the guide's examples use without showing their creation.
    s.create_pool("ml-pool", {"hardware": "gpu"}, {"cpu": 8.0, "memory": 16384.0, "gpu": 2.0})
    s.create_pool("production-pool", {"tier": "prod"}, {"cpu": 4.0, "memory": 2048.0, "special_hardware": 1.0})
    s.create_pool("inference-pool", {"role": "inference"}, {"cpu": 2.0})
    s.create_pool("custom-pool", {"role": "custom"}, {"cpu": 2.0})
    s.create_pool("premium-pool", {"tier": "premium"}, {"cpu": 8.0, "memory": 16384.0, "gpu": 2.0, "tpu": 1.0})
    yield s
    for pool in s.list_pools():
        s.delete_pool(pool["name"], force=True)
    ray.shutdown()


def test_basic_and_custom_resources(scheduler):
    scheduler.create_agent(
        name="gpu-worker",
        pool="ml-pool",
        actor_class=AgentActor,
        resources={
            "cpu": 4.0,  # 4个CPU核心
            "memory": 8192.0,  # 8GB内存（单位：MB）
            "gpu": 1.0,  # 1个GPU
        },
    )
    scheduler.create_pool(
        name="fpga-pool",
        labels={"hardware": "fpga"},
        resources={
            "cpu": 2.0,
            "memory": 4096.0,
            "gpu": 0.0,
            "fpga": 1.0,  # 自定义资源
        },
        target_agents=2,
    )
    scheduler.create_agent(
        name="fpga-agent",
        pool="fpga-pool",
        actor_class=AgentActor,
        resources={
            "cpu": 2.0,
            "memory": 4096.0,
            "gpu": 0.0,
            "fpga": 1.0,
        },
    )
    assert scheduler.get_pool("ml-pool")["used"] == {"cpu": 4.0, "memory": 8192.0, "gpu": 1.0}
    assert scheduler.get_pool("fpga-pool")["used"] == {"cpu": 2.0, "memory": 4096.0, "fpga": 1.0}
    assert scheduler.get_pool("fpga-pool")["capacity"]["fpga"] == 2.0
    assert ray.available_resources().get("fpga") == 3.0  # the agent holds one FPGA on the node
    assert scheduler.agent_info("fpga-agent")["status"] == "alive"


def test_every_ray_option_of_the_guide(scheduler):
    scheduler.create_agent(
        name="reliable-agent",
        pool="production-pool",
        actor_class=AgentActor,
        ray_options={
            # ========== 容错和恢复 ==========
            "max_restarts": 5,  # Actor失败后最多重启5次
            "max_task_retries": 3,  # 单个任务最多重试3次
            # ========== 并发控制 ==========
            "max_concurrency": 20,  # 最多同时处理20个请求
            # ========== 生命周期管理 ==========
            "lifetime": "detached",  # 不随创建者退出（持久化actor）
            "name": "persistent-agent",  # 命名actor（用于重新连接）
            # ========== 资源隔离 ==========
            "runtime_env": {  # 运行时环境
                "env_vars": {"MODEL_PATH": "/models"},
            },
            # ========== 调度策略 ==========
            "scheduling_strategy": "SPREAD",  # 分散调度策略
        },
    )
    # The table's remaining keys: namespace, num_cpus/num_gpus/memory (overridden by resources), custom
    # resources, get_if_exists.
    ref = scheduler.create_agent(
        "table-agent",
        "production-pool",
        AgentActor,
        resources={"cpu": 1.0},
        ray_options={
            "namespace": "sm-guide",
            "num_cpus": 3,
            "num_gpus": 0,
            "memory": 2**30,
            "resources": {"special_hardware": 1},
            "get_if_exists": True,
            "scheduling_strategy": "DEFAULT",
        },
    )
    again = scheduler.create_agent("table-agent", "production-pool", AgentActor, ray_options={"get_if_exists": True})
    assert again.name == ref.name
    info = scheduler.agent_info("table-agent")
    assert info["resources"] == {"cpu": 1.0, "memory": 1024.0, "special_hardware": 1.0}  # resources= won for cpu
    reconnected = ray.get_actor("persistent-agent", namespace="sm-guide")
    assert ray.get(reconnected.sm_ready.remote())["pid"] == scheduler.agent_info("reliable-agent")["pid"]


def test_custom_init_arguments(scheduler):
    scheduler.create_agent(
        name="model-server-1",
        pool="inference-pool",
        actor_class=ModelServerAgent,
        # 传递自定义参数
        actor_kwargs={
            "model_path": "/models/gpt-4",
            "batch_size": 64,
            "timeout": 60.0,
            "enable_cache": True,
        },
    )
    got = scheduler.get_agent("model-server-1").call("settings")
    assert got["name"] == "model-server-1" and got["labels"] == {"role": "inference"}
    assert (got["model_path"], got["batch_size"], got["timeout"], got["enable_cache"]) == (
        "/models/gpt-4",
        64,
        60.0,
        True,
    )

    scheduler.create_agent(
        name="custom-agent",
        pool="custom-pool",
        actor_class=CustomAgent,
        actor_args=["value1", "value2"],  # 对应 arg1, arg2
        actor_kwargs={  # 对应 kwarg1, kwarg2
            "kwarg1": "foo",
            "kwarg2": "bar",
        },
    )
    assert scheduler.get_agent("custom-agent").call("get_args") == ("value1", "value2", "foo", "bar")


def test_combined_configuration(scheduler):
    scheduler.create_agent(
        name="premium-agent",
        pool="premium-pool",
        actor_class=CustomModelAgent,
        # 1. 资源配置
        resources={
            "cpu": 8.0,
            "memory": 16384.0,
            "gpu": 2.0,
            "tpu": 1.0,  # 自定义资源
        },
        # 2. Ray actor选项
        ray_options={
            "max_restarts": 5,
            "max_concurrency": 50,
            "lifetime": "detached",
            "name": "premium-agent-persistent",
            "runtime_env": {
                "env_vars": {
                    "CUDA_VISIBLE_DEVICES": "0,1",
                    "OMP_NUM_THREADS": "8",
                },
            },
        },
        # 3. 自定义初始化参数
        actor_kwargs={
            "model_path": "/models/llama-2-70b",
            "batch_size": 128,
            "max_seq_length": 4096,
            "enable_flash_attention": True,
            "quantization": "int8",
        },
    )
    got = scheduler.get_agent("premium-agent").call("settings")
    assert got["model_path"] == "/models/llama-2-70b" and got["quantization"] == "int8"
    assert got["resources"]["CPU"] == 8.0 and got["resources"]["GPU"] == 2.0 and got["resources"]["tpu"] == 1.0
    assert got["env"]["OMP_NUM_THREADS"] == "8"
    assert scheduler.get_pool("premium-pool")["free"] == {}  # the pool's whole spec is held by this agent
