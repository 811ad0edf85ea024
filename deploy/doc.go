// Package deploy holds the tests of what a mesh operator runs: the
// Dockerfile, the Docker Compose file in compose/, the Helm chart in
// helm/toolmesh and the plain manifests in k8s/ that `make manifests`
// renders from it. It is its own Go module so that Helm's and Kubernetes'
// libraries, which the tests render the chart with, stay out of the main
// module's build.
package deploy
