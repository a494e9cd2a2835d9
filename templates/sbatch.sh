#!/bin/sh
# sbatch template: being written
