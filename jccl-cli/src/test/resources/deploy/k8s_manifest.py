"""Checks docs/deploy/jccl-job.yaml and prints the environment Kubernetes would give pod INDEX.

usage: k8s_manifest.py MANIFEST INDEX TOKEN
Prints "ENV NAME=VALUE" lines (valueFrom resolved as Kubernetes does: the completion-index
annotation gives INDEX, the secret gives TOKEN), then "MANIFEST OK", or "MANIFEST BAD: why" and exit 1.
"""
import sys

import yaml

manifest, index, token = sys.argv[1], sys.argv[2], sys.argv[3]
docs = [d for d in yaml.safe_load_all(open(manifest)) if d]
problems = []


def need(cond, why):
    if not cond:
        problems.append(why)


services = [d for d in docs if d.get("kind") == "Service"]
jobs = [d for d in docs if d.get("kind") == "Job"]
need(len(services) == 1 and len(jobs) == 1, "expected one Service and one Job")
svc, job = services[0], jobs[0]
need(svc["spec"].get("clusterIP") == "None", "the Service must be headless (clusterIP: None)")
need(svc["spec"].get("publishNotReadyAddresses") is True, "publishNotReadyAddresses: true")
spec = job["spec"]
need(spec.get("completionMode") == "Indexed", "an Indexed Job")
need(spec.get("completions") == spec.get("parallelism"), "every rank runs at once (parallelism = completions)")
pod = spec["template"]["spec"]
need(pod.get("subdomain") == svc["metadata"]["name"], "subdomain = the headless Service's name")
c = pod["containers"][0]
need(c["resources"]["limits"].get("nvidia.com/gpu") == 1, "one GPU per pod")
need("IPC_LOCK" in c["securityContext"]["capabilities"]["add"], "IPC_LOCK")
shm = [m for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"]
need(len(shm) == 1, "/dev/shm mounted")
vol = [v for v in pod["volumes"] if shm and v["name"] == shm[0]["name"]]
need(len(vol) == 1 and vol[0]["emptyDir"].get("medium") == "Memory", "/dev/shm is an emptyDir with medium: Memory")
env = {}
for e in c["env"]:
    if "value" in e:
        env[e["name"]] = str(e["value"])
    elif "fieldRef" in e.get("valueFrom", {}):
        need(e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['batch.kubernetes.io/job-completion-index']",
             e["name"] + " from the completion index")
        env[e["name"]] = index
    elif "secretKeyRef" in e.get("valueFrom", {}):
        env[e["name"]] = token
need(env.get("JCCL_WORLD_SIZE") == str(spec.get("completions")), "JCCL_WORLD_SIZE = completions")
need(env.get("JCCL_COMM_ID", "").startswith(job["metadata"]["name"] + "-0." + svc["metadata"]["name"] + ":"),
     "JCCL_COMM_ID names pod 0 through the headless Service")
if problems:
    print("MANIFEST BAD: " + "; ".join(problems))
    sys.exit(1)
for k, v in env.items():
    print("ENV %s=%s" % (k, v))
print("MANIFEST OK")
