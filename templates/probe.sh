#!/bin/sh
# probe script: being written
